package ipset

// Wire constants from linux/netfilter/ipset/ip_set.h, ip_set_hash.h and
// ip_set_bitmap.h.

// Protocol versions.
const (
	protocolMax = 7 // IPSET_PROTOCOL
	protocolMin = 6 // IPSET_PROTOCOL_MIN
)

// maxNameLen is IPSET_MAXNAMELEN: set and type names are at most 31 bytes
// plus a NUL.
const maxNameLen = 32

// maxCommentLen is IPSET_MAX_COMMENT_SIZE.
const maxCommentLen = 255

// Commands (enum ipset_cmd).
const (
	cmdProtocol = 1
	cmdCreate   = 2
	cmdDestroy  = 3
	cmdFlush    = 4
	cmdRename   = 5
	cmdSwap     = 6
	cmdList     = 7
	cmdSave     = 8
	cmdAdd      = 9
	cmdDel      = 10
	cmdTest     = 11
	cmdHeader   = 12
	cmdType     = 13
)

// Attributes at command level.
const (
	attrProtocol    = 1
	attrSetName     = 2
	attrTypeName    = 3
	attrSetName2    = attrTypeName
	attrRevision    = 4
	attrFamily      = 5
	attrFlags       = 6
	attrData        = 7
	attrADT         = 8
	attrLineNo      = 9
	attrProtocolMin = 10
	attrRevisionMin = attrProtocolMin
	attrIndex       = 11
)

// CADT attributes (inside attrData).
const (
	attrIP        = 1
	attrIPTo      = 2
	attrCIDR      = 3
	attrPort      = 4
	attrPortTo    = 5
	attrTimeout   = 6
	attrProto     = 7
	attrCADTFlags = 8
	attrCADTLine  = attrLineNo
	attrMark      = 10
	attrMarkMask  = 11

	attrInitVal    = 17
	attrHashSize   = 18
	attrMaxElem    = 19
	attrNetmask    = 20
	attrBucketSize = 21
	attrResize     = 22
	attrSize       = 23
	attrElements   = 24
	attrReferences = 25
	attrMemSize    = 26

	attrEther    = 17
	attrName     = 18
	attrNameRef  = 19
	attrIP2      = 20
	attrCIDR2    = 21
	attrIP2To    = 22
	attrIface    = 23
	attrBytes    = 24
	attrPackets  = 25
	attrComment  = 26
	attrSkbMark  = 27
	attrSkbPrio  = 28
	attrSkbQueue = 29
	attrPad      = 30
)

// Attributes nested in attrIP and attrIP2.
const (
	attrIPAddrIPv4 = 1
	attrIPAddrIPv6 = 2
)

// Command-level flags (enum ipset_cmd_flags).
const (
	flagListSetName = 1 << 1
	flagListHeader  = 1 << 2
)

// CADT flags (enum ipset_cadt_flags).
const (
	cadtNoMatch      = 1 << 2
	cadtWithCounters = 1 << 3
	cadtWithComment  = 1 << 4
	cadtWithForceAdd = 1 << 5
)

// NFPROTO values used as set families.
const (
	nfprotoUnspec = 0
	nfprotoIPv4   = 2
	nfprotoIPv6   = 10
)
