//! [`CollectiveError`]: why a collective failed, with HCCL's result codes ([`HcclResult`]).
//! The messages are formatted here and only here: the Python `mpi` backend builds the same
//! errors through `_npurt._collective_error(...)`.

use std::fmt;

/// HCCL's `HcclResult` values (the ones npurt returns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HcclResult {
    pub code: u32,
    pub name: &'static str,
}

macro_rules! hccl_codes {
    ($($id:ident = $code:literal),* $(,)?) => {
        impl HcclResult {
            $(pub const $id: HcclResult = HcclResult { code: $code, name: concat!("HCCL_", stringify!($id)) };)*
            /// Every `HcclResult` value npurt knows (the Python enum reads this table).
            pub const ALL: &'static [HcclResult] = &[$(HcclResult::$id),*];
        }
    };
}

hccl_codes! {
    SUCCESS = 0,
    E_PARA = 1,
    E_PTR = 2,
    E_MEMORY = 3,
    E_INTERNAL = 4,
    E_NOT_SUPPORT = 5,
    E_NOT_FOUND = 6,
    E_UNAVAIL = 7,
    E_SYSCALL = 8,
    E_TIMEOUT = 9,
    E_OPEN_FILE_FAILURE = 10,
    E_TCP_CONNECT = 11,
    E_ROCE_CONNECT = 12,
    E_TCP_TRANSFER = 13,
    E_ROCE_TRANSFER = 14,
    E_RUNTIME = 15,
    E_DRV = 16,
    E_PROFILING = 17,
    E_CCE = 18,
    E_NETWORK = 19,
    E_AGAIN = 20,
    E_REMOTE = 21,
    E_SUSPENDING = 22,
    E_OPRETRY_FAIL = 23,
    E_OOM = 24,
}

impl fmt::Display for HcclResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.name)
    }
}

/// A set of ranks, displayed as `1, 3` (or `none`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranks(pub Vec<u32>);

impl fmt::Display for Ranks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// What aborted a communicator (the class of [`CollectiveError::Aborted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortCause {
    Timeout,
    Desync,
    RankFailed,
}

/// Why a collective failed. Every rank that waits at a failed collective gets one of these
/// (the rank that detects a failure marks the communicator aborted; the others read it).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectiveError {
    /// A bad argument (sizes, dtype, root, a non-contiguous tensor...).
    #[error("{op}: {reason}")]
    Param { op: String, reason: String },
    /// The deadline passed with some ranks missing.
    #[error(
        "{op} (collective #{seq}) timed out after {secs:.3}s on rank {rank}: rank(s) {missing} never arrived \
         (arrived: {arrived}); raise the timeout (timeout=, HCCL_EXEC_TIMEOUT) if they are only slow"
    )]
    Timeout {
        op: String,
        seq: u64,
        rank: u32,
        secs: f64,
        missing: Ranks,
        arrived: Ranks,
    },
    /// Every rank arrived, but the data exchange did not finish before the deadline (a
    /// transport that stalled, or a rank that stopped inside the exchange).
    #[error(
        "{op} (collective #{seq}) timed out after {secs:.3}s on rank {rank}: every rank arrived ({arrived}) \
         but the data exchange did not finish"
    )]
    Stalled {
        op: String,
        seq: u64,
        rank: u32,
        secs: f64,
        arrived: Ranks,
    },
    /// Ranks called different collectives (or sizes, dtypes, ops, roots) at the same seq.
    #[error("collective desync at #{seq}: {detail}")]
    Desync { seq: u64, detail: String },
    /// A rank's process died, or it left the group, while others waited for it.
    #[error("{op} (collective #{seq}): rank {rank} {what}; the communicator is aborted")]
    RankFailed {
        op: String,
        seq: u64,
        rank: u32,
        what: String,
    },
    /// The communicator was aborted by an earlier failure (which is repeated here); the
    /// class and code are the cause's.
    #[error("{op} (collective #{seq}) cannot run: the communicator was aborted at collective #{at}: {reason}")]
    Aborted {
        op: String,
        seq: u64,
        at: u64,
        reason: String,
        cause: AbortCause,
    },
    /// An internal failure (a transport system call, a bootstrap problem).
    #[error("{op}: {reason}")]
    Internal { op: String, reason: String },
}

impl CollectiveError {
    /// The HCCL result code.
    pub fn code(&self) -> HcclResult {
        match self {
            Self::Param { .. } => HcclResult::E_PARA,
            Self::Timeout { .. } | Self::Stalled { .. } => HcclResult::E_TIMEOUT,
            Self::Desync { .. } => HcclResult::E_PARA,
            Self::RankFailed { .. } => HcclResult::E_REMOTE,
            Self::Aborted { cause, .. } => match cause {
                AbortCause::Timeout => HcclResult::E_TIMEOUT,
                AbortCause::Desync => HcclResult::E_PARA,
                AbortCause::RankFailed => HcclResult::E_REMOTE,
            },
            Self::Internal { .. } => HcclResult::E_INTERNAL,
        }
    }

    /// The Python class name (`npurt.exceptions`).
    pub fn class_name(&self) -> &'static str {
        match self {
            Self::Param { .. } | Self::Internal { .. } => "CollectiveError",
            Self::Timeout { .. } | Self::Stalled { .. } => "CollectiveTimeoutError",
            Self::Desync { .. } => "CollectiveDesyncError",
            Self::RankFailed { .. } => "RankFailedError",
            Self::Aborted { cause, .. } => match cause {
                AbortCause::Timeout => "CollectiveTimeoutError",
                AbortCause::Desync => "CollectiveDesyncError",
                AbortCause::RankFailed => "RankFailedError",
            },
        }
    }

    pub fn param(op: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Param {
            op: op.into(),
            reason: reason.into(),
        }
    }

    pub fn internal(op: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Internal {
            op: op.into(),
            reason: reason.into(),
        }
    }

    /// The error a front builds by name (`_npurt._collective_error(kind, op, seq, ranks,
    /// detail, rank, world)`): `kind` is `timeout`, `desync`, `rank_failed`, `param` or
    /// `internal`. `ranks` are the missing ranks (timeout) or the failed rank (first
    /// entry); `world` (0: unknown) gives the ranks that arrived. A timeout with no rank
    /// missing in a known world is [`Self::Stalled`].
    pub fn from_parts(
        kind: &str,
        op: &str,
        seq: u64,
        rank: u32,
        ranks: &[u32],
        detail: &str,
        world: u32,
    ) -> Option<Self> {
        Some(match kind {
            "timeout" => {
                let (op, secs) = (op.to_string(), detail.parse().unwrap_or(0.0));
                let arrived = Ranks((0..world).filter(|r| !ranks.contains(r)).collect());
                if ranks.is_empty() && world > 0 {
                    Self::Stalled {
                        op,
                        seq,
                        rank,
                        secs,
                        arrived,
                    }
                } else {
                    Self::Timeout {
                        op,
                        seq,
                        rank,
                        secs,
                        missing: Ranks(ranks.to_vec()),
                        arrived,
                    }
                }
            }
            "desync" => Self::Desync {
                seq,
                detail: detail.into(),
            },
            "rank_failed" => Self::RankFailed {
                op: op.into(),
                seq,
                rank: ranks.first().copied().unwrap_or(rank),
                what: if detail.is_empty() {
                    "failed".into()
                } else {
                    detail.into()
                },
            },
            "param" => Self::param(op, detail),
            "internal" => Self::internal(op, detail),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_collective_and_ranks() {
        let e = CollectiveError::Timeout {
            op: "all_reduce".into(),
            seq: 7,
            rank: 0,
            secs: 0.5,
            missing: Ranks(vec![2, 3]),
            arrived: Ranks(vec![0, 1]),
        };
        let s = e.to_string();
        assert!(
            s.contains("all_reduce (collective #7)") && s.contains("rank(s) 2, 3 never arrived"),
            "{s}"
        );
        assert_eq!(e.code().code, 9);
        assert_eq!(e.class_name(), "CollectiveTimeoutError");
        let d = CollectiveError::from_parts("rank_failed", "broadcast", 3, 0, &[1], "died (pid 42)", 0).unwrap();
        assert_eq!(d.code(), HcclResult::E_REMOTE);
        assert!(d.to_string().contains("rank 1 died (pid 42)"));
        assert!(CollectiveError::from_parts("nope", "x", 0, 0, &[], "", 0).is_none());
        let t = CollectiveError::from_parts("timeout", "all_reduce", 2, 0, &[1, 3], "1.5", 4).unwrap();
        assert!(
            t.to_string().contains("rank(s) 1, 3 never arrived (arrived: 0, 2)"),
            "{t}"
        );
        let st = CollectiveError::from_parts("timeout", "all_reduce", 2, 1, &[], "1.5", 3).unwrap();
        assert!(
            st.to_string()
                .contains("every rank arrived (0, 1, 2) but the data exchange did not finish"),
            "{st}"
        );
        assert_eq!(st.class_name(), "CollectiveTimeoutError");
        assert_eq!(st.code(), HcclResult::E_TIMEOUT);
    }
}
