// Package ipvsuapi holds the generic netlink protocol of IPVS as
// linux/ip_vs.h defines it: the family name, commands, attributes and the
// flag values the kernel keeps. The client (package ipvs) and its fake
// (ipvstest) share these definitions; they stay independent in how they
// encode and parse messages.
package ipvsuapi

// The generic netlink family.
const (
	GenlName    = "IPVS" // IPVS_GENL_NAME
	GenlVersion = 1      // IPVS_GENL_VERSION
)

// Commands (enum IPVS_CMD_*).
const (
	CmdNewService = 1
	CmdSetService = 2
	CmdDelService = 3
	CmdGetService = 4
	CmdNewDest    = 5
	CmdSetDest    = 6
	CmdDelDest    = 7
	CmdGetDest    = 8
	CmdSetConfig  = 12
	CmdGetConfig  = 13
	CmdSetInfo    = 14
	CmdGetInfo    = 15
	CmdZero       = 16
	CmdFlush      = 17
)

// Command attributes (IPVS_CMD_ATTR_*).
const (
	CmdAttrService       = 1
	CmdAttrDest          = 2
	CmdAttrDaemon        = 3
	CmdAttrTimeoutTCP    = 4
	CmdAttrTimeoutTCPFin = 5
	CmdAttrTimeoutUDP    = 6
)

// Service attributes (IPVS_SVC_ATTR_*).
const (
	SvcAttrAF        = 1
	SvcAttrProtocol  = 2
	SvcAttrAddr      = 3
	SvcAttrPort      = 4
	SvcAttrFWMark    = 5
	SvcAttrSchedName = 6
	SvcAttrFlags     = 7
	SvcAttrTimeout   = 8
	SvcAttrNetmask   = 9
	SvcAttrStats     = 10
	SvcAttrPEName    = 11
	SvcAttrStats64   = 12
)

// Destination attributes (IPVS_DEST_ATTR_*).
const (
	DestAttrAddr         = 1
	DestAttrPort         = 2
	DestAttrFwdMethod    = 3
	DestAttrWeight       = 4
	DestAttrUThresh      = 5
	DestAttrLThresh      = 6
	DestAttrActiveConns  = 7
	DestAttrInactConns   = 8
	DestAttrPersistConns = 9
	DestAttrStats        = 10
	DestAttrAddrFamily   = 11
	DestAttrStats64      = 12
	DestAttrTunType      = 13
	DestAttrTunPort      = 14
	DestAttrTunFlags     = 15
)

// Counter attributes (IPVS_STATS_ATTR_*), nested in the *_ATTR_STATS and
// *_ATTR_STATS64 attributes.
const (
	StatsAttrConns    = 1
	StatsAttrInPkts   = 2
	StatsAttrOutPkts  = 3
	StatsAttrInBytes  = 4
	StatsAttrOutBytes = 5
	StatsAttrCPS      = 6
	StatsAttrInPPS    = 7
	StatsAttrOutPPS   = 8
	StatsAttrInBPS    = 9
	StatsAttrOutBPS   = 10
)

// Info attributes (IPVS_INFO_ATTR_*).
const (
	InfoAttrVersion     = 1
	InfoAttrConnTabSize = 2
)

// Name limits of the kernel's attribute policy: IP_VS_SCHEDNAME_MAXLEN - 1
// and IP_VS_PENAME_MAXLEN.
const (
	SchedNameMax = 15
	PENameMax    = 16
)

// Flag values the kernel keeps.
const (
	SvcFlagHashed = 0x2 // IP_VS_SVC_F_HASHED
	ConnFwdMask   = 0x7 // IP_VS_CONN_F_FWD_MASK
	ConnFwdTunnel = 0x2 // IP_VS_CONN_F_TUNNEL
	TunTypeGUE    = 1   // IP_VS_CONN_F_TUNNEL_TYPE_GUE
)
