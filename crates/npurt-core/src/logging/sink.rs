//! npurt's `log` logger and its sinks: plog lines to stdout and to a size-capped, rotated
//! file, and records to the bindings' queue. A record is written on the thread that logs
//! it (the file behind a mutex: log lines are rare unless debug is on).

use super::format::plog_line;
use super::{level, queue, Level, LogRecord, Module};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// CANN caps each plog file at 20 MB, then rotates.
pub(crate) const FILE_CAP: u64 = 20 << 20;

pub(crate) static LOGGER: Logger = Logger;
static PRINT_STDOUT: AtomicBool = AtomicBool::new(false);
static HAS_FILE: AtomicBool = AtomicBool::new(false);
static FILE: Mutex<Option<FileSink>> = Mutex::new(None);

pub(crate) struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        Module::of_target(m.target()).is_some_and(|module| Level::of(m.level()) >= level(module))
    }

    fn log(&self, r: &log::Record<'_>) {
        let Some(module) = Module::of_target(r.target()) else {
            return;
        };
        let lvl = Level::of(r.level());
        if lvl < level(module) {
            return;
        }
        let file = match r.file_static() {
            Some(f) => std::borrow::Cow::Borrowed(f),
            None => std::borrow::Cow::Owned(r.file().unwrap_or("?").to_string()),
        };
        let rec = LogRecord {
            level: lvl,
            module,
            message: r.args().to_string(),
            file,
            line: r.line().unwrap_or(0),
            unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            thread: crate::profiler::thread_id(),
            thread_name: std::thread::current().name().map(str::to_string),
        };
        dispatch(rec);
    }

    fn flush(&self) {
        if let Some(f) = FILE.lock().as_mut() {
            let _ = f.file.flush();
        }
    }
}

fn dispatch(rec: LogRecord) {
    let to_stdout = PRINT_STDOUT.load(Relaxed);
    if to_stdout || HAS_FILE.load(Relaxed) {
        let line = plog_line(&rec);
        if to_stdout {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
        if let Some(f) = FILE.lock().as_mut() {
            f.write(line.as_bytes());
        }
    }
    if queue::forwarding() {
        queue::push(rec);
    }
}

/// Prints plog lines to stdout (`ASCEND_LOG_PRINT_TO_STDOUT=1`) or stops.
pub fn set_print_stdout(on: bool) {
    PRINT_STDOUT.store(on, Relaxed);
}

/// Appends plog lines to `path` (rotating at 20 MB, keeping `count` files: `path`,
/// `path.1` … `path.{count-1}`), or stops writing a file (`None`).
pub fn set_file(path: Option<&Path>, count: usize) -> std::io::Result<()> {
    let sink = path.map(|p| FileSink::open(p, FILE_CAP, count)).transpose()?;
    let mut g = FILE.lock();
    HAS_FILE.store(sink.is_some(), Relaxed);
    *g = sink;
    Ok(())
}

/// An append-only log file that rotates when it reaches its cap.
pub(crate) struct FileSink {
    path: PathBuf,
    file: File,
    size: u64,
    cap: u64,
    count: usize,
}

impl FileSink {
    pub(crate) fn open(path: &Path, cap: u64, count: usize) -> std::io::Result<FileSink> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(FileSink {
            path: path.to_path_buf(),
            file,
            size,
            cap: cap.max(1),
            count: count.max(1),
        })
    }

    fn rotated(&self, i: usize) -> PathBuf {
        let mut s = self.path.clone().into_os_string();
        s.push(format!(".{i}"));
        PathBuf::from(s)
    }

    /// Writes one line; errors are ignored (logging must not fail the runtime).
    pub(crate) fn write(&mut self, line: &[u8]) {
        if self.size > 0 && self.size + line.len() as u64 > self.cap {
            self.rotate();
        }
        if self.file.write_all(line).is_ok() {
            self.size += line.len() as u64;
        }
    }

    fn rotate(&mut self) {
        if self.count > 1 {
            for i in (1..self.count - 1).rev() {
                let _ = std::fs::rename(self.rotated(i), self.rotated(i + 1));
            }
            let _ = std::fs::rename(&self.path, self.rotated(1));
        }
        let reopened = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&self.path);
        if let Ok(f) = reopened {
            (self.file, self.size) = (f, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_rotates_at_its_cap() {
        let dir = std::env::temp_dir().join(format!("npurt-logrot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("plog.log");
        let mut f = FileSink::open(&path, 100, 3).unwrap();
        for i in 0..10 {
            f.write(format!("line {i:02} ..............................\n").as_bytes());
            // 40 bytes
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        // 2 lines per file; 3 files kept: the live one and two older.
        assert_eq!(
            read(&path),
            "line 08 ..............................\nline 09 ..............................\n"
        );
        assert!(read(&f.rotated(1)).starts_with("line 06"));
        assert!(read(&f.rotated(2)).starts_with("line 04"));
        assert!(!f.rotated(3).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
