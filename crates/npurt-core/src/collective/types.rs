//! What a collective is: its kind ([`CollKind`]), element type ([`HcclDataType`], HCCL's
//! values), reduction ([`ReduceOp`], HCCL's values plus AVG) and the descriptor every rank
//! publishes at the rendezvous ([`OpDesc`]), which desync detection compares; the byte
//! ranges it reads and writes ([`Region`]) and their check against the descriptor.

use super::error::CollectiveError;
use super::rendezvous::CResult;
use crate::memory::DeviceBuffer;

/// HCCL's `HcclDataType` values (INT128 and the FP8 kinds are not supported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum HcclDataType {
    Int8 = 0,
    Int16 = 1,
    Int32 = 2,
    Fp16 = 3,
    Fp32 = 4,
    Int64 = 5,
    Uint64 = 6,
    Uint8 = 7,
    Uint16 = 8,
    Uint32 = 9,
    Fp64 = 10,
    Bfp16 = 11,
}

impl HcclDataType {
    pub const ALL: [HcclDataType; 12] = [
        Self::Int8,
        Self::Int16,
        Self::Int32,
        Self::Fp16,
        Self::Fp32,
        Self::Int64,
        Self::Uint64,
        Self::Uint8,
        Self::Uint16,
        Self::Uint32,
        Self::Fp64,
        Self::Bfp16,
    ];

    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|d| *d as u32 == v)
    }

    /// The numpy-style name (`float32`, `bfloat16`...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Int8 => "int8",
            Self::Int16 => "int16",
            Self::Int32 => "int32",
            Self::Fp16 => "float16",
            Self::Fp32 => "float32",
            Self::Int64 => "int64",
            Self::Uint64 => "uint64",
            Self::Uint8 => "uint8",
            Self::Uint16 => "uint16",
            Self::Uint32 => "uint32",
            Self::Fp64 => "float64",
            Self::Bfp16 => "bfloat16",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|d| d.name() == name)
    }

    pub fn size(self) -> usize {
        match self {
            Self::Int8 | Self::Uint8 => 1,
            Self::Int16 | Self::Uint16 | Self::Fp16 | Self::Bfp16 => 2,
            Self::Int32 | Self::Uint32 | Self::Fp32 => 4,
            Self::Int64 | Self::Uint64 | Self::Fp64 => 8,
        }
    }
}

/// HCCL's `HcclReduceOp` (SUM 0, PROD 1, MAX 2, MIN 3) and torch's AVG (sum, then divide
/// by the world size; integers divide with truncation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ReduceOp {
    Sum = 0,
    Prod = 1,
    Max = 2,
    Min = 3,
    Avg = 4,
}

impl ReduceOp {
    pub fn from_u32(v: u32) -> Option<Self> {
        [Self::Sum, Self::Prod, Self::Max, Self::Min, Self::Avg]
            .into_iter()
            .find(|o| *o as u32 == v)
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Prod => "prod",
            Self::Max => "max",
            Self::Min => "min",
            Self::Avg => "avg",
        }
    }
}

/// The collectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum CollKind {
    AllReduce = 1,
    Broadcast = 2,
    Reduce = 3,
    AllGather = 4,
    ReduceScatter = 5,
    AllToAll = 6,
    Barrier = 7,
    Send = 8,
    Recv = 9,
}

impl CollKind {
    pub const ALL: [CollKind; 9] = [
        Self::AllReduce,
        Self::Broadcast,
        Self::Reduce,
        Self::AllGather,
        Self::ReduceScatter,
        Self::AllToAll,
        Self::Barrier,
        Self::Send,
        Self::Recv,
    ];
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| *k as u32 == v)
    }
    /// torch.distributed's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::AllReduce => "all_reduce",
            Self::Broadcast => "broadcast",
            Self::Reduce => "reduce",
            Self::AllGather => "all_gather",
            Self::ReduceScatter => "reduce_scatter",
            Self::AllToAll => "all_to_all",
            Self::Barrier => "barrier",
            Self::Send => "send",
            Self::Recv => "recv",
        }
    }
    /// HCCL's API name (profiles show collectives under it), as a `'static` reference to
    /// the name (what [`crate::EngineDesc::name`] holds).
    pub fn hccl_name(self) -> &'static &'static str {
        match self {
            Self::AllReduce => &"HcclAllReduce",
            Self::Broadcast => &"HcclBroadcast",
            Self::Reduce => &"HcclReduce",
            Self::AllGather => &"HcclAllGather",
            Self::ReduceScatter => &"HcclReduceScatter",
            Self::AllToAll => &"HcclAlltoAll",
            Self::Barrier => &"HcclBarrier",
            Self::Send => &"HcclSend",
            Self::Recv => &"HcclRecv",
        }
    }
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
    pub fn reduces(self) -> bool {
        matches!(self, Self::AllReduce | Self::Reduce | Self::ReduceScatter)
    }
    pub fn has_root(self) -> bool {
        matches!(self, Self::Broadcast | Self::Reduce | Self::Send | Self::Recv)
    }
}

/// What one rank calls: the descriptor compared across ranks at the rendezvous. `count` is
/// HCCL's count: elements per rank (all_reduce, broadcast, reduce: the buffer; all_gather:
/// the send count; reduce_scatter: the receive count; all_to_all: elements per peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpDesc {
    pub kind: CollKind,
    pub dtype: HcclDataType,
    pub op: ReduceOp,
    pub count: u64,
    /// Root (broadcast, reduce) or peer (send, recv); 0 otherwise.
    pub root: u32,
}

impl OpDesc {
    /// Checks the descriptor against the world size; returns (send bytes, recv bytes) the
    /// buffers must hold.
    pub fn buffer_bytes(&self, world: u32) -> Result<(usize, usize), CollectiveError> {
        let name = self.kind.name();
        if self.kind.has_root() && self.root >= world {
            let what = if matches!(self.kind, CollKind::Send | CollKind::Recv) {
                "peer"
            } else {
                "root"
            };
            return Err(CollectiveError::param(
                name,
                format!("{what} {} is out of range for a group of {world} rank(s)", self.root),
            ));
        }
        let n = world as u64;
        let b = |elems: u64| -> Result<usize, CollectiveError> {
            elems
                .checked_mul(self.dtype.size() as u64)
                .and_then(|x| usize::try_from(x).ok())
                .filter(|&x| x <= isize::MAX as usize)
                .ok_or_else(|| CollectiveError::param(name, format!("count {} is too large", self.count)))
        };
        let c = self.count;
        let cn = c
            .checked_mul(n)
            .ok_or_else(|| CollectiveError::param(name, format!("count {c} is too large")))?;
        Ok(match self.kind {
            CollKind::AllReduce | CollKind::Broadcast | CollKind::Reduce | CollKind::Send | CollKind::Recv => {
                (b(c)?, b(c)?)
            }
            CollKind::AllGather => (b(c)?, b(cn)?),
            CollKind::ReduceScatter => (b(cn)?, b(c)?),
            CollKind::AllToAll => (b(cn)?, b(cn)?),
            CollKind::Barrier => (0, 0),
        })
    }

    /// `all_reduce(float32 x 1024, sum)`: how errors name the call.
    pub fn describe(&self) -> String {
        let mut s = format!("{}({} x {}", self.kind.name(), self.dtype.name(), self.count);
        if self.kind.reduces() {
            s.push_str(", ");
            s.push_str(self.op.name());
        }
        match self.kind {
            CollKind::Broadcast | CollKind::Reduce => s.push_str(&format!(", root {}", self.root)),
            CollKind::Send => s.push_str(&format!(", to {}", self.root)),
            CollKind::Recv => s.push_str(&format!(", from {}", self.root)),
            _ => {}
        }
        s.push(')');
        s
    }

    /// Packs the descriptor into two words for the progress board.
    pub(crate) fn pack(&self) -> (u64, u64) {
        let a = (self.kind as u64) | (self.dtype as u64) << 8 | (self.op as u64) << 16 | (self.root as u64) << 32;
        (a, self.count)
    }

    pub(crate) fn unpack(a: u64, count: u64) -> Option<Self> {
        Some(OpDesc {
            kind: CollKind::from_u32((a & 0xff) as u32)?,
            dtype: HcclDataType::from_u32(((a >> 8) & 0xff) as u32)?,
            op: ReduceOp::from_u32(((a >> 16) & 0xff) as u32)?,
            root: (a >> 32) as u32,
            count,
        })
    }

    /// Whether two ranks' descriptors belong to the same collective. The op and dtype
    /// only matter where they are used; the root of all_gather etc. is ignored.
    pub fn matches(&self, other: &OpDesc) -> bool {
        self.kind == other.kind
            && self.count == other.count
            && (self.kind == CollKind::Barrier || self.dtype == other.dtype)
            && (!self.kind.reduces() || self.op == other.op)
            && (!matches!(self.kind, CollKind::Broadcast | CollKind::Reduce) || self.root == other.root)
    }
}

/// A byte range a collective reads or writes, and what keeps it alive.
#[derive(Clone)]
pub struct Region {
    pub addr: usize,
    pub len: usize,
    pub keep: Option<DeviceBuffer>,
}

impl Region {
    pub fn of(buf: &DeviceBuffer, offset: usize, len: usize) -> Region {
        Region {
            addr: buf.addr() + offset,
            len,
            keep: Some(buf.clone()),
        }
    }
}

/// Why `kind` cannot run with these send and receive bytes (`(address, length)`), or None:
/// all_to_all never in place; all_reduce and reduce in place only exactly (the receive
/// buffer the send buffer itself: a partial overlap would read input a piece of the
/// output already overwrote). Every backend asks this one rule (`mpi`: `_coll_overlap`).
pub fn overlap_error(kind: CollKind, send: (usize, usize), recv: (usize, usize)) -> Option<&'static str> {
    let overlap = send.1 > 0 && recv.1 > 0 && send.0 < recv.0 + recv.1 && recv.0 < send.0 + send.1;
    match kind {
        _ if !overlap => None,
        CollKind::AllToAll => Some("the send and receive buffers overlap (all_to_all cannot run in place)"),
        CollKind::AllReduce | CollKind::Reduce if send.0 != recv.0 => {
            Some("the send and receive buffers overlap without being the same buffer (in place means recv is send)")
        }
        _ => None,
    }
}

/// Checks the buffers against the descriptor: present where needed and large enough.
pub(crate) fn check_regions(desc: &OpDesc, world: u32, send: Option<&Region>, recv: Option<&Region>) -> CResult<()> {
    let (ns, nr) = desc.buffer_bytes(world)?;
    let name = desc.kind.name();
    let need = |r: Option<&Region>, n: usize, what: &str| -> CResult<()> {
        match r {
            _ if n == 0 => Ok(()),
            None => Err(CollectiveError::param(name, format!("the {what} buffer is missing"))),
            Some(r) if r.len < n => Err(CollectiveError::param(
                name,
                format!(
                    "the {what} buffer holds {} bytes, {} needed ({})",
                    r.len,
                    n,
                    desc.describe()
                ),
            )),
            Some(_) => Ok(()),
        }
    };
    match desc.kind {
        CollKind::Send => need(send, ns, "send"),
        CollKind::Recv => need(recv, nr, "receive"),
        _ => {
            need(send, ns, "send")?;
            need(recv, nr, "receive")?;
            match (send, recv) {
                (Some(s), Some(r)) => match overlap_error(desc.kind, (s.addr, ns), (r.addr, nr)) {
                    Some(why) => Err(CollectiveError::param(name, why)),
                    None => Ok(()),
                },
                _ => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip_and_sizes() {
        let d = OpDesc {
            kind: CollKind::ReduceScatter,
            dtype: HcclDataType::Bfp16,
            op: ReduceOp::Max,
            count: 10,
            root: 0,
        };
        let (a, c) = d.pack();
        assert_eq!(OpDesc::unpack(a, c), Some(d));
        assert_eq!(d.buffer_bytes(4).unwrap(), (80, 20));
        assert_eq!(d.describe(), "reduce_scatter(bfloat16 x 10, max)");
        let b = OpDesc {
            kind: CollKind::Broadcast,
            root: 4,
            ..d
        };
        assert!(b.buffer_bytes(4).is_err());
        assert_eq!(HcclDataType::from_u32(11), Some(HcclDataType::Bfp16));
    }

    #[test]
    fn overlap_rule() {
        use CollKind::*;
        let e = |k, s, r| overlap_error(k, s, r).is_some();
        // exactly in place: all_reduce / reduce yes, all_to_all never
        assert!(!e(AllReduce, (1000, 64), (1000, 64)) && !e(Reduce, (1000, 64), (1000, 64)));
        assert!(e(AllToAll, (1000, 64), (1000, 64)));
        // a partial overlap either way round
        for k in [AllReduce, Reduce, AllToAll] {
            assert!(e(k, (1000, 64), (1032, 64)) && e(k, (1032, 64), (1000, 64)), "{k:?}");
            assert!(
                !e(k, (1000, 64), (1064, 64)) && !e(k, (1064, 64), (1000, 64)),
                "{k:?} adjacent"
            );
            assert!(!e(k, (1000, 0), (1000, 64)), "{k:?} empty");
        }
        // the in-place forms of all_gather and reduce_scatter are theirs to handle
        assert!(!e(AllGather, (1016, 16), (1000, 64)) && !e(ReduceScatter, (1000, 64), (1016, 16)));
    }
}
