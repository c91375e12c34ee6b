//! The plog line (CANN's host log format), the one format of the file and stdout sinks:
//!
//! ```text
//! [ERROR] RUNTIME(2082291,python3):2024-07-04-14:14:25.036.721 [stream/mod.rs:163]2082297 message
//! ```
//!
//! That is `[LEVEL] MODULE(pid,process):YYYY-MM-DD-HH:MM:SS.mmm.uuu [file:line]tid message`,
//! in local time, as CANN writes it.

use super::LogRecord;
use std::fmt::Write;
use std::sync::OnceLock;

/// The process name CANN shows (`/proc/self/comm`, else the executable's name).
fn process_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/self/comm")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .or_else(|| {
                std::env::current_exe()
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            })
            .unwrap_or_else(|| "npurt".to_string())
    })
}

/// Local calendar time of `unix_secs`: (year, month, day, hour, minute, second).
fn local_time(unix_secs: i64) -> (i32, u32, u32, u32, u32, u32) {
    let t: libc::time_t = unix_secs as libc::time_t;
    // SAFETY: `tm` is plain data (all-zero is a valid value); localtime_r writes only into
    // it and reads `t`, both live for the call.
    let (ok, tm) = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let ok = !libc::localtime_r(&t, &mut tm).is_null();
        (ok, tm)
    };
    if !ok {
        return (1970, 1, 1, 0, 0, 0);
    }
    (
        tm.tm_year + 1900,
        (tm.tm_mon + 1) as u32,
        tm.tm_mday as u32,
        tm.tm_hour as u32,
        tm.tm_min as u32,
        tm.tm_sec as u32,
    )
}

/// Formats one record as a plog line (with the trailing newline).
pub fn plog_line(r: &LogRecord) -> String {
    let secs = (r.unix_ns / 1_000_000_000) as i64;
    let sub = r.unix_ns % 1_000_000_000;
    let (y, mo, d, h, mi, s) = local_time(secs);
    let mut out = String::with_capacity(96 + r.message.len());
    let _ = write!(
        out,
        "[{}] {}({},{}):{y:04}-{mo:02}-{d:02}-{h:02}:{mi:02}:{s:02}.{:03}.{:03} [{}:{}]{} ",
        r.level.plog_name(),
        r.module.name(),
        std::process::id(),
        process_name(),
        sub / 1_000_000,
        (sub / 1_000) % 1_000,
        short_file(&r.file),
        r.line,
        r.thread,
    );
    // One record is one line: newlines inside the message would break line-based tools.
    for c in r.message.chars() {
        out.push(if c == '\n' || c == '\r' { ' ' } else { c });
    }
    out.push('\n');
    out
}

/// The file name a record shows: npurt's sources relative to their crate's `src/`
/// (`stream/mod.rs`), anything else by its last component.
pub(crate) fn short_file(path: &str) -> &str {
    if let Some(i) = path.rfind("/src/") {
        return &path[i + 5..];
    }
    if let Some(rest) = path.strip_prefix("src/") {
        return rest;
    }
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::super::{Level, Module};
    use super::*;

    #[test]
    fn line_has_the_plog_shape() {
        let r = LogRecord {
            level: Level::Warning,
            module: Module::Mem,
            message: "two\nlines".to_string(),
            file: "crates/npurt-core/src/memory/mod.rs".into(),
            line: 42,
            unix_ns: 1_700_000_000_123_456_789,
            thread: 77,
            thread_name: None,
        };
        let line = plog_line(&r);
        let pid = std::process::id();
        assert!(line.starts_with(&format!("[WARNING] MEM({pid},")), "{line}");
        assert!(line.ends_with(".123.456 [memory/mod.rs:42]77 two lines\n"), "{line}");
        // The timestamp: YYYY-MM-DD-HH:MM:SS.mmm.uuu after the "):".
        let ts = line.split("):").nth(1).unwrap().split(' ').next().unwrap();
        assert_eq!(ts.len(), "2023-11-14-22:13:20.123.456".len(), "{ts}");
        assert_eq!(ts.as_bytes()[4], b'-');
        assert_eq!(ts.as_bytes()[10], b'-');
    }

    #[test]
    fn short_files() {
        assert_eq!(short_file("crates/npurt-core/src/stream/mod.rs"), "stream/mod.rs");
        assert_eq!(short_file("src/lib.rs"), "lib.rs");
        assert_eq!(short_file("/home/u/app/main.py"), "main.py");
        assert_eq!(short_file("x.py"), "x.py");
    }
}
