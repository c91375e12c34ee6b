//! The wire format between an importer and the exporter's server (one `SOCK_SEQPACKET`
//! message each way, little-endian). Request: magic, op, the key's secret. Reply: magic,
//! status, then on success the mapping (offset, length, data offset, bytes, device, page
//! kind) with the memfd as `SCM_RIGHTS`; on failure an error number and a message. After a
//! successful reply the connection stays open: it *is* the lease, and its end (the importer
//! closed the import or died) is what the exporter watches.

use crate::error::IpcError;

const MAGIC: &[u8; 8] = b"NPURTIPC";
pub(crate) const OP_IMPORT: u32 = 1;
pub(crate) const REQUEST_LEN: usize = 8 + 4 + 4 + 16;
pub(crate) const REPLY_MAX: usize = 1024;

pub(crate) fn request(op: u32, secret: &[u8; 16]) -> [u8; REQUEST_LEN] {
    let mut m = [0u8; REQUEST_LEN];
    m[..8].copy_from_slice(MAGIC);
    m[8..12].copy_from_slice(&op.to_le_bytes());
    m[16..].copy_from_slice(secret);
    m
}

/// (op, secret) of a well-formed request.
pub(crate) fn parse_request(m: &[u8]) -> Option<(u32, [u8; 16])> {
    if m.len() != REQUEST_LEN || &m[..8] != MAGIC {
        return None;
    }
    let op = u32::from_le_bytes(m[8..12].try_into().ok()?);
    Some((op, m[16..32].try_into().ok()?))
}

/// A successful reply's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Granted {
    pub map_offset: u64,
    pub map_len: u64,
    pub data_offset: u64,
    pub nbytes: u64,
    pub device: u32,
    pub hugetlb: bool,
}

fn put(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

pub(crate) fn reply_ok(g: &Granted) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&0u32.to_le_bytes());
    for x in [g.map_offset, g.map_len, g.data_offset, g.nbytes] {
        put(&mut v, x);
    }
    v.extend_from_slice(&g.device.to_le_bytes());
    v.extend_from_slice(&u32::from(g.hugetlb).to_le_bytes());
    v
}

/// Error numbers on the wire (the importer rebuilds the matching [`IpcError`]).
fn errno_of(e: &IpcError) -> (u32, u32, &'static str) {
    match e {
        IpcError::UnknownKey { pid } => (1, *pid, ""),
        IpcError::NotPermitted { pid, .. } => (2, *pid, ""),
        IpcError::Stale { pid, reason } => (3, *pid, reason),
        IpcError::Closed { pid } => (4, *pid, ""),
        IpcError::NotShareable { .. } => (5, 0, ""),
        _ => (6, 0, ""),
    }
}

pub(crate) fn reply_err(e: &IpcError) -> Vec<u8> {
    let (n, pid, _) = errno_of(e);
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&n.to_le_bytes());
    v.extend_from_slice(&pid.to_le_bytes());
    let text = e.to_string();
    v.extend_from_slice(&text.as_bytes()[..text.len().min(REPLY_MAX - 16)]);
    v
}

/// Decodes a reply from `exporter`; `Err` for a refusal or a garbled message.
pub(crate) fn parse_reply(m: &[u8], exporter: u32) -> Result<Granted, IpcError> {
    let garbled = |r: &str| IpcError::Protocol {
        pid: exporter,
        reason: format!("malformed reply ({r})"),
    };
    if m.len() < 12 || &m[..8] != MAGIC {
        return Err(garbled("bad header"));
    }
    let u32_at = |i: usize| u32::from_le_bytes(m[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().expect("8 bytes"));
    let status = u32_at(8);
    if status == 0 {
        if m.len() != 12 + 32 + 8 {
            return Err(garbled("bad length"));
        }
        return Ok(Granted {
            map_offset: u64_at(12),
            map_len: u64_at(20),
            data_offset: u64_at(28),
            nbytes: u64_at(36),
            device: u32_at(44),
            hugetlb: u32_at(48) != 0,
        });
    }
    let pid = if m.len() >= 16 { u32_at(12) } else { exporter };
    let text = String::from_utf8_lossy(m.get(16..).unwrap_or(&[])).into_owned();
    Err(match status {
        1 => IpcError::UnknownKey { pid: exporter },
        2 => IpcError::NotPermitted { pid, exporter },
        3 if text.contains("reset") => IpcError::Stale {
            pid: exporter,
            reason: "reset the memory's device",
        },
        3 => IpcError::Stale {
            pid: exporter,
            reason: "freed the memory",
        },
        4 => IpcError::Closed { pid: exporter },
        _ => IpcError::Protocol {
            pid: exporter,
            reason: text,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let s = [7u8; 16];
        assert_eq!(parse_request(&request(OP_IMPORT, &s)), Some((OP_IMPORT, s)));
        assert_eq!(parse_request(b"garbage"), None);
        let g = Granted {
            map_offset: 4096,
            map_len: 8192,
            data_offset: 12,
            nbytes: 100,
            device: 0,
            hugetlb: false,
        };
        assert_eq!(parse_reply(&reply_ok(&g), 5).unwrap(), g);
        let e = parse_reply(&reply_err(&IpcError::NotPermitted { pid: 9, exporter: 5 }), 5).unwrap_err();
        assert!(matches!(e, IpcError::NotPermitted { pid: 9, exporter: 5 }), "{e:?}");
        let e = parse_reply(&reply_err(&IpcError::Closed { pid: 5 }), 5).unwrap_err();
        assert!(matches!(e, IpcError::Closed { pid: 5 }));
        assert!(parse_reply(b"NPURTIPC", 5).is_err());
    }
}
