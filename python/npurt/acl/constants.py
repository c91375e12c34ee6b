"""ACL constants with the names and integer values of CANN's headers.

Sources: ``include/external/acl/acl_rt.h``, ``acl_base.h`` and
``error_codes/rt_error_codes.h`` of hicann/runtime (CANN runtime); pyacl's reference pages
(aclpythondevg) list the same values. pyacl itself ships no constants module: scripts
define them (``ACL_MEM_MALLOC_HUGE_FIRST = 0`` ...), so these names are a convenience and
every call also takes the bare integers.
"""

from __future__ import annotations

from .. import _npurt

# --- aclError: success and ACL-level errors (acl_base.h) ------------------------------
ACL_SUCCESS = 0
ACL_ERROR_NONE = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_REPEAT_SUBSCRIBE = 100033
ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034
ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035
ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036
ACL_ERROR_REPEAT_FINALIZE = 100037
# model errors (acl_base.h)
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_DESERIALIZE_MODEL = 100012
ACL_ERROR_PARSE_MODEL = 100013
ACL_ERROR_READ_MODEL_FAILURE = 100014
ACL_ERROR_MODEL_SIZE_INVALID = 100015
ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017
ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018
ACL_ERROR_OP_NOT_FOUND = 100024
ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026
ACL_ERROR_BAD_ALLOC = 200000
ACL_ERROR_API_NOT_SUPPORT = 200001
ACL_ERROR_INVALID_DEVICE = 200002
ACL_ERROR_FEATURE_UNSUPPORTED = 200006
ACL_ERROR_INTERNAL_ERROR = 500000
ACL_ERROR_FAILURE = 500001

# --- graph-engine errors of model loading and execution (ge_error_codes.h) ------------
ACL_ERROR_GE_PARAM_INVALID = 145000
ACL_ERROR_GE_EXEC_NOT_INIT = 145001
ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID = 145002
ACL_ERROR_GE_EXEC_MODEL_ID_INVALID = 145003
ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID = 145006
ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID = 145007
ACL_ERROR_GE_EXEC_LOAD_MODEL_REPEATED = 145009
ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID = 145011

# --- runtime errors (rt_error_codes.h) ------------------------------------------------
ACL_RT_SUCCESS = 0
# The ACL_ERROR_RT_* codes (ACL_ERROR_RT_PARAM_INVALID = 107000, ..._INVALID_HANDLE = 107017,
# ..._MEMORY_ALLOCATION = 207001, ..._STREAM_SYNC_TIMEOUT = 507046 ...) are the runtime's own
# table (npurt_core::AclCode::ALL), not written again here.
globals().update(_npurt._acl_error_codes())

# --- IPC memory (aclrtIpcMemGetExportKey / aclrtIpcMemImportByKey flags) ---------------
ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT = 0x0  # pid whitelist on
ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION = 0x1
ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT = 0x0
ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS = 0x1
ACL_IPC_MEM_KEY_LEN = 65  # the key buffer of aclrtIpcMemGetExportKey (npurt's keys: 63 chars)

# --- aclrtMemMallocPolicy --------------------------------------------------------------
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEM_MALLOC_HUGE_ONLY = 1
ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3
ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4
ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5
ACL_MEM_MALLOC_HUGE1G_ONLY = 6
ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7
ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100
ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000
ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000

# --- aclrtMemcpyKind -------------------------------------------------------------------
ACL_MEMCPY_HOST_TO_HOST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_MEMCPY_DEFAULT = 4
ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5
ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6
ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7

# --- aclrtMemAttr (get_mem_info) -------------------------------------------------------
ACL_DDR_MEM = 0
ACL_HBM_MEM = 1
ACL_DDR_MEM_HUGE = 2
ACL_DDR_MEM_NORMAL = 3
ACL_HBM_MEM_HUGE = 4
ACL_HBM_MEM_NORMAL = 5
ACL_DDR_MEM_P2P_HUGE = 6
ACL_DDR_MEM_P2P_NORMAL = 7
ACL_HBM_MEM_P2P_HUGE = 8
ACL_HBM_MEM_P2P_NORMAL = 9
ACL_HBM_MEM_HUGE1G = 10
ACL_HBM_MEM_P2P_HUGE1G = 11
ACL_MEM_NORMAL = 12
ACL_MEM_HUGE = 13
ACL_MEM_HUGE1G = 14
ACL_MEM_P2P_NORMAL = 15
ACL_MEM_P2P_HUGE = 16
ACL_MEM_P2P_HUGE1G = 17

# --- aclrtCallbackBlockType ------------------------------------------------------------
ACL_CALLBACK_NO_BLOCK = 0
ACL_CALLBACK_BLOCK = 1

# --- events ----------------------------------------------------------------------------
ACL_EVENT_SYNC = 0x00000001
ACL_EVENT_CAPTURE_STREAM_PROGRESS = 0x00000002
ACL_EVENT_TIME_LINE = 0x00000008
ACL_EVENT_DEVICE_USE_ONLY = 0x00000010
ACL_EVENT_EXTERNAL = 0x00000020
ACL_EVENT_IPC = 0x00000040
ACL_EVENT_STATUS_COMPLETE = 0
ACL_EVENT_STATUS_NOT_READY = 1
ACL_EVENT_STATUS_RESERVED = 2
ACL_EVENT_RECORDED_STATUS_NOT_READY = 0
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
ACL_EVENT_WAIT_STATUS_COMPLETE = 0  # aclrtEventWaitStatus (aclrtQueryEventWaitStatus)
ACL_EVENT_WAIT_STATUS_NOT_READY = 1
ACL_EVENT_WAIT_STATUS_RESERVED = 0xFFFF

# --- streams ---------------------------------------------------------------------------
ACL_STREAM_FAST_LAUNCH = 0x00000001
ACL_STREAM_FAST_SYNC = 0x00000002
ACL_STREAM_PERSISTENT = 0x00000004
ACL_STREAM_HUGE = 0x00000008
ACL_STREAM_CPU_SCHEDULE = 0x00000010
ACL_STREAM_DEVICE_USE_ONLY = 0x00000020
ACL_STREAM_STATUS_COMPLETE = 0
ACL_STREAM_STATUS_NOT_READY = 1

# --- aclLogLevel (acl_base.h): the levels of acl.app_log ---------------------------------
ACL_DEBUG = 0
ACL_INFO = 1
ACL_WARNING = 2
ACL_ERROR = 3

# --- aclFormat (model tensors) ---------------------------------------------------------
ACL_FORMAT_UNDEFINED = -1
ACL_FORMAT_NCHW = 0
ACL_FORMAT_NHWC = 1
ACL_FORMAT_ND = 2

# --- aclrtRunMode ----------------------------------------------------------------------
ACL_DEVICE = 0
ACL_HOST = 1

# --- device status, last-error level, utilisation ----------------------------------------
ACL_RT_DEVICE_STATUS_NORMAL = 0
ACL_RT_DEVICE_STATUS_ABNORMAL = 1
ACL_RT_DEVICE_STATUS_END = 0xFFFF
ACL_RT_THREAD_LEVEL = 0
#: What aclrtGetDeviceUtilizationRate reports for a unit it does not measure.
ACL_RT_UTILIZATION_NOT_SUPPORT = -1

#: Every name above, for ``from npurt.acl.constants import *``.
__all__ = [n for n in dir() if n.startswith("ACL_")]
