//! IPC keys: `npurt1-`, the exporter's pid (8 hex digits), its server's socket nonce (16),
//! then the secret (32 hex digits = 128 random bits from `getrandom`): 63 printable
//! characters, so a key fits ACL's 65-byte key buffer with its NUL. Only the secret
//! authorises anything; it is never derived from addresses or counters. The pid and nonce
//! only say where to ask (the abstract socket `npurt-ipc-<uid>-<pid>-<nonce>`).
//!
//! An array key adds the view after the buffer key: `<key>:<dtype>:<shape>:<strides>:<offset>`
//! (dims and strides comma-separated, strides in elements, offset in bytes).

use crate::error::IpcError;

/// The prefix (and version) of every key.
pub const PREFIX: &str = "npurt1-";
/// Characters of a buffer key.
pub const KEY_LEN: usize = PREFIX.len() + 8 + 16 + 32;

/// A parsed buffer key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub pid: u32,
    pub nonce: u64,
    pub secret: [u8; 16],
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        write!(f, "Key(pid={}, nonce={:016x})", self.pid, self.nonce)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn malformed(key: &str, reason: &'static str) -> IpcError {
    // Show a prefix only: the rest may be a secret.
    let shown: String = key.chars().take(24).collect();
    IpcError::MalformedKey { key: shown, reason }
}

impl Key {
    pub(crate) fn new(pid: u32, nonce: u64) -> Result<Key, IpcError> {
        let mut secret = [0u8; 16];
        super::sys::random(&mut secret)?;
        Ok(Key { pid, nonce, secret })
    }

    pub(crate) fn socket_name(pid: u32, nonce: u64, uid: u32) -> String {
        format!("npurt-ipc-{uid}-{pid}-{nonce:016x}")
    }

    pub(crate) fn format(&self) -> String {
        format!("{PREFIX}{:08x}{:016x}{}", self.pid, self.nonce, hex(&self.secret))
    }

    /// Parses a buffer key (the part before any array suffix).
    pub(crate) fn parse(key: &str) -> Result<Key, IpcError> {
        let buf_key = key.split(':').next().unwrap_or("");
        let Some(body) = buf_key.strip_prefix(PREFIX) else {
            return Err(malformed(key, "it does not start with 'npurt1-'"));
        };
        if buf_key.len() != KEY_LEN || !body.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed(key, "expected 56 hexadecimal digits after 'npurt1-'"));
        }
        let pid = u32::from_str_radix(&body[..8], 16).map_err(|_| malformed(key, "bad pid"))?;
        let nonce = u64::from_str_radix(&body[8..24], 16).map_err(|_| malformed(key, "bad nonce"))?;
        if pid == 0 {
            return Err(malformed(key, "pid 0"));
        }
        let mut secret = [0u8; 16];
        for (i, s) in secret.iter_mut().enumerate() {
            let j = 24 + 2 * i;
            *s = u8::from_str_radix(&body[j..j + 2], 16).map_err(|_| malformed(key, "bad secret"))?;
        }
        Ok(Key { pid, nonce, secret })
    }
}

/// The view an array key carries after its buffer key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayMeta {
    /// dtype name (`"float32"`...), checked by whoever builds the array.
    pub dtype: String,
    pub shape: Vec<usize>,
    /// In elements.
    pub strides: Vec<isize>,
    /// Byte offset of element 0 in the buffer.
    pub offset: usize,
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn split<T: std::str::FromStr>(s: &str) -> Option<Vec<T>> {
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',').map(|x| x.parse().ok()).collect()
}

/// `<buffer key>:<dtype>:<shape>:<strides>:<offset>`.
pub fn array_key(buffer_key: &str, meta: &ArrayMeta) -> String {
    format!(
        "{buffer_key}:{}:{}:{}:{}",
        meta.dtype,
        join(&meta.shape),
        join(&meta.strides),
        meta.offset
    )
}

/// Splits an array key into its buffer key and view.
pub fn parse_array_key(key: &str) -> Result<(String, ArrayMeta), IpcError> {
    let parts: Vec<&str> = key.split(':').collect();
    let bad = |r| Err(malformed(key, r));
    if parts.len() != 5 {
        return bad("an array key has 5 ':'-separated parts (from DeviceArray.ipc_export)");
    }
    Key::parse(parts[0])?;
    let dtype = parts[1];
    if dtype.is_empty() || dtype.len() > 16 || !dtype.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return bad("bad dtype");
    }
    let (Some(shape), Some(strides), Ok(offset)) = (split(parts[2]), split(parts[3]), parts[4].parse()) else {
        return bad("bad shape, strides or offset");
    };
    let meta = ArrayMeta {
        dtype: dtype.to_string(),
        shape,
        strides,
        offset,
    };
    if meta.shape.len() != meta.strides.len() || meta.shape.len() > 32 {
        return bad("shape and strides differ in length");
    }
    Ok((parts[0].to_string(), meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let k = Key::new(1234, 0xdead_beef).unwrap();
        let s = k.format();
        assert_eq!(s.len(), KEY_LEN);
        assert!(s.len() < 65);
        assert_eq!(Key::parse(&s).unwrap(), k);
        assert_ne!(Key::new(1234, 0xdead_beef).unwrap().secret, k.secret);
        assert!(!format!("{k:?}").contains(&hex(&k.secret)));
        for bad in [
            "",
            "npurt1-",
            "xyz",
            &s[..s.len() - 1],
            &format!("{s}0"),
            &s.replace('-', "_"),
        ] {
            assert!(Key::parse(bad).is_err(), "{bad}");
        }
        let meta = ArrayMeta {
            dtype: "float32".into(),
            shape: vec![2, 3],
            strides: vec![3, 1],
            offset: 8,
        };
        let a = array_key(&s, &meta);
        assert_eq!(parse_array_key(&a).unwrap(), (s.clone(), meta));
        assert_eq!(Key::parse(&a).unwrap(), k);
        assert!(parse_array_key(&s).is_err());
        assert!(parse_array_key(&format!("{s}:f:1,2:1:0")).is_err());
    }
}
