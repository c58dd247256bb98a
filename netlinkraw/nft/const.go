package nft

import "strconv"

// nf_tables message types (enum nf_tables_msg_types, linux/netfilter/nf_tables.h).
const (
	msgNewTable   = 0
	msgGetTable   = 1
	msgDelTable   = 2
	msgNewChain   = 3
	msgGetChain   = 4
	msgDelChain   = 5
	msgNewRule    = 6
	msgGetRule    = 7
	msgDelRule    = 8
	msgNewSet     = 9
	msgGetSet     = 10
	msgDelSet     = 11
	msgNewSetElem = 12
	msgGetSetElem = 13
	msgDelSetElem = 14
	msgNewGen     = 15
	msgGetGen     = 16
)

// Attributes (enum nft_*_attributes).
const (
	attrTableName     = 1 // NFTA_TABLE_NAME
	attrTableFlags    = 2 // NFTA_TABLE_FLAGS
	attrTableHandle   = 4 // NFTA_TABLE_HANDLE
	attrTableUserData = 6 // NFTA_TABLE_USERDATA

	attrChainTable    = 1  // NFTA_CHAIN_TABLE
	attrChainHandle   = 2  // NFTA_CHAIN_HANDLE
	attrChainName     = 3  // NFTA_CHAIN_NAME
	attrChainHook     = 4  // NFTA_CHAIN_HOOK
	attrChainPolicy   = 5  // NFTA_CHAIN_POLICY
	attrChainType     = 7  // NFTA_CHAIN_TYPE
	attrChainUserData = 12 // NFTA_CHAIN_USERDATA

	attrHookNum      = 1 // NFTA_HOOK_HOOKNUM
	attrHookPriority = 2 // NFTA_HOOK_PRIORITY

	attrRuleTable       = 1 // NFTA_RULE_TABLE
	attrRuleChain       = 2 // NFTA_RULE_CHAIN
	attrRuleHandle      = 3 // NFTA_RULE_HANDLE
	attrRuleExpressions = 4 // NFTA_RULE_EXPRESSIONS
	attrRuleUserData    = 7 // NFTA_RULE_USERDATA

	attrSetTable    = 1  // NFTA_SET_TABLE
	attrSetName     = 2  // NFTA_SET_NAME
	attrSetFlags    = 3  // NFTA_SET_FLAGS
	attrSetKeyType  = 4  // NFTA_SET_KEY_TYPE
	attrSetKeyLen   = 5  // NFTA_SET_KEY_LEN
	attrSetDataType = 6  // NFTA_SET_DATA_TYPE
	attrSetDataLen  = 7  // NFTA_SET_DATA_LEN
	attrSetPolicy   = 8  // NFTA_SET_POLICY
	attrSetDesc     = 9  // NFTA_SET_DESC
	attrSetID       = 10 // NFTA_SET_ID
	attrSetTimeout  = 11 // NFTA_SET_TIMEOUT
	attrSetUserData = 13 // NFTA_SET_USERDATA
	attrSetHandle   = 16 // NFTA_SET_HANDLE

	attrSetDescSize   = 1 // NFTA_SET_DESC_SIZE
	attrSetDescConcat = 2 // NFTA_SET_DESC_CONCAT
	attrSetFieldLen   = 1 // NFTA_SET_FIELD_LEN

	attrElemListTable    = 1 // NFTA_SET_ELEM_LIST_TABLE
	attrElemListSet      = 2 // NFTA_SET_ELEM_LIST_SET
	attrElemListElements = 3 // NFTA_SET_ELEM_LIST_ELEMENTS
	attrElemListSetID    = 4 // NFTA_SET_ELEM_LIST_SET_ID

	attrElemKey      = 1 // NFTA_SET_ELEM_KEY
	attrElemData     = 2 // NFTA_SET_ELEM_DATA
	attrElemFlags    = 3 // NFTA_SET_ELEM_FLAGS
	attrElemTimeout  = 4 // NFTA_SET_ELEM_TIMEOUT
	attrElemUserData = 6 // NFTA_SET_ELEM_USERDATA
	attrElemKeyEnd   = 9 // NFTA_SET_ELEM_KEY_END

	attrDataValue   = 1 // NFTA_DATA_VALUE
	attrDataVerdict = 2 // NFTA_DATA_VERDICT

	attrVerdictCode  = 1 // NFTA_VERDICT_CODE
	attrVerdictChain = 2 // NFTA_VERDICT_CHAIN

	attrListElem = 1 // NFTA_LIST_ELEM

	attrGenID = 1 // NFTA_GEN_ID
)

// Verdict codes (Verdict.Code): netfilter's NF_DROP and NF_ACCEPT and
// nf_tables' own (enum nft_verdicts).
const (
	VerdictDrop     int32 = 0
	VerdictAccept   int32 = 1
	VerdictContinue int32 = -1
	VerdictBreak    int32 = -2
	VerdictJump     int32 = -3
	VerdictGoto     int32 = -4
	VerdictReturn   int32 = -5
)

// Set flags (Set.Flags, enum nft_set_flags).
const (
	SetAnonymous uint32 = 0x1
	SetConstant  uint32 = 0x2
	SetInterval  uint32 = 0x4
	SetMap       uint32 = 0x8
	SetTimeout   uint32 = 0x10
	SetEval      uint32 = 0x20
	SetObject    uint32 = 0x40
	SetConcat    uint32 = 0x80
)

// DataVerdict is the data type of a verdict map (Set.DataType,
// NFT_DATA_VERDICT).
const DataVerdict uint32 = 0xffffff00

// ElemIntervalEnd is the element flag NFT_SET_ELEM_INTERVAL_END.
const ElemIntervalEnd uint32 = 0x1

// Hooks (Chain.Hook, NF_INET_*).
const (
	HookPrerouting  uint32 = 0
	HookInput       uint32 = 1
	HookForward     uint32 = 2
	HookOutput      uint32 = 3
	HookPostrouting uint32 = 4
)

// String returns the family's name in nft's syntax.
func (f Family) String() string {
	switch f {
	case FamilyINet:
		return "inet"
	case FamilyIPv4:
		return "ip"
	case FamilyIPv6:
		return "ip6"
	}
	return "family(" + strconv.Itoa(int(f)) + ")"
}
