//! Runtime logs: the one owner of the log levels, the environment variables that set them
//! and the line format. The crates log through the `log` facade (`log::debug!` and co);
//! [`init`] installs npurt's logger, which filters by module, writes plog-style lines to
//! stdout (`ASCEND_LOG_PRINT_TO_STDOUT=1`) and to `NPURT_LOG_FILE`, and queues records for
//! the Python bindings, whose one forwarder thread hands them to Python's `logging`
//! ([`take`], [`wait`]).
//!
//! Levels are CANN's: 0 debug, 1 info, 2 warning, 3 error (the default), 4 null (off).
//! Modules are CANN-like names for parts of npurt ([`Module`]): `RUNTIME` (devices,
//! contexts, streams, events, executor), `MEM` (npurt-mem, `memory`, `alloc`), `KERNEL`
//! (npurt-kernels), `PROFILING` (the profiler) and `APP` (`acl.app_log`).
//!
//! Cost when a level is off: `log`'s macros compare with `log::max_level()` (one relaxed
//! load) before formatting anything; this module keeps that word at the most verbose
//! module level. The memory lines come from the memory event hook, switched on with it
//! ([`crate::memory::events`]: still one relaxed load per allocation when off).
//!
//! ```
//! use npurt_core::logging::{self, Level, Module};
//! logging::init();
//! logging::set_level(Some(Module::Mem), Level::Info);
//! assert_eq!(logging::level(Module::Mem), Level::Info);
//! logging::set_level(None, Level::Error);
//! assert_eq!(logging::level(Module::Mem), Level::Error);
//! ```

mod env;
mod format;
mod queue;
mod sink;

pub use env::{parse_spec, Settings, Spec};
pub use format::plog_line;
pub use queue::{dropped, set_forwarding, take, wait, wake};
pub use sink::{set_file, set_print_stdout};

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};

/// A log level, numbered as CANN numbers them (`ASCEND_GLOBAL_LOG_LEVEL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warning = 2,
    Error = 3,
    /// Nothing is logged.
    Null = 4,
}

impl Level {
    const ALL: [Level; 5] = [Level::Debug, Level::Info, Level::Warning, Level::Error, Level::Null];

    /// CANN's number (0 debug … 4 null).
    pub fn from_cann(n: i64) -> Option<Level> {
        usize::try_from(n).ok().and_then(|i| Level::ALL.get(i).copied())
    }

    /// A level given as a number: CANN's 0–4, or Python `logging`'s 10/20/30/40/50
    /// (50, CRITICAL, is error: npurt has nothing above it).
    pub fn from_number(n: i64) -> Option<Level> {
        match n {
            10 => Some(Level::Debug),
            20 => Some(Level::Info),
            30 => Some(Level::Warning),
            40 | 50 => Some(Level::Error),
            _ => Level::from_cann(n),
        }
    }

    /// A level name (`debug`, `info`, `warning`/`warn`, `error`, `off`/`null`/`none`,
    /// any case) or CANN's number as text.
    pub fn parse(s: &str) -> Option<Level> {
        let t = s.trim();
        if let Ok(n) = t.parse::<i64>() {
            return Level::from_cann(n);
        }
        match t.to_ascii_lowercase().as_str() {
            "debug" => Some(Level::Debug),
            "info" => Some(Level::Info),
            "warning" | "warn" => Some(Level::Warning),
            "error" => Some(Level::Error),
            "off" | "null" | "none" => Some(Level::Null),
            _ => None,
        }
    }

    /// The name `npurt.get_log_level()` returns.
    pub fn name(self) -> &'static str {
        ["debug", "info", "warning", "error", "off"][self as usize]
    }

    /// The tag of a plog line (`[ERROR]`).
    pub fn plog_name(self) -> &'static str {
        ["DEBUG", "INFO", "WARNING", "ERROR", "NULL"][self as usize]
    }

    fn filter(self) -> log::LevelFilter {
        use log::LevelFilter as F;
        [F::Debug, F::Info, F::Warn, F::Error, F::Off][self as usize]
    }

    /// The level of a `log` record (trace counts as debug).
    pub fn of(l: log::Level) -> Level {
        match l {
            log::Level::Trace | log::Level::Debug => Level::Debug,
            log::Level::Info => Level::Info,
            log::Level::Warn => Level::Warning,
            log::Level::Error => Level::Error,
        }
    }

    fn from_u8(v: u8) -> Level {
        Level::ALL[usize::from(v.min(4))]
    }
}

/// The part of npurt a record comes from, with a CANN-like module name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    Runtime = 0,
    Mem = 1,
    Kernel = 2,
    Profiling = 3,
    App = 4,
}

const MODULES: usize = 5;

impl Module {
    pub const ALL: [Module; MODULES] = [
        Module::Runtime,
        Module::Mem,
        Module::Kernel,
        Module::Profiling,
        Module::App,
    ];

    /// The name in `ASCEND_MODULE_LOG_LEVEL` and in plog lines (`RUNTIME`).
    pub fn name(self) -> &'static str {
        ["RUNTIME", "MEM", "KERNEL", "PROFILING", "APP"][self as usize]
    }

    /// A module name, any case.
    pub fn parse(s: &str) -> Option<Module> {
        let t = s.trim();
        Module::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(t))
    }

    /// Which module a `log` target (a Rust module path, or a module name) belongs to;
    /// `None` for targets outside npurt (their records are dropped).
    pub fn of_target(target: &str) -> Option<Module> {
        const MEM: [&str; 3] = ["npurt_mem", "npurt_core::memory", "npurt_core::alloc"];
        if let Some(m) = Module::ALL.into_iter().find(|m| m.name() == target) {
            return Some(m);
        }
        if MEM.iter().any(|p| target.starts_with(p)) {
            Some(Module::Mem)
        } else if target.starts_with("npurt_core::profiler") {
            Some(Module::Profiling)
        } else if target.starts_with("npurt_kernels") {
            Some(Module::Kernel)
        } else if target.starts_with("npurt_core") || target.starts_with("_npurt") {
            Some(Module::Runtime)
        } else {
            None
        }
    }
}

/// Each module's level (index: `Module as usize`); error until [`init`] reads the environment.
static LEVELS: [AtomicU8; MODULES] = [const { AtomicU8::new(Level::Error as u8) }; MODULES];
/// The level last set for every module at once (what `npurt.get_log_level()` reports).
static GLOBAL: AtomicU8 = AtomicU8::new(Level::Error as u8);
/// npurt's logger is the process's `log` logger (another may have been installed first).
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The level of `module`.
#[inline]
pub fn level(module: Module) -> Level {
    Level::from_u8(LEVELS[module as usize].load(Relaxed))
}

/// The level set for all modules (module overrides aside).
pub fn global_level() -> Level {
    Level::from_u8(GLOBAL.load(Relaxed))
}

/// Sets the level of one module, or (`None`) of every module, dropping overrides.
pub fn set_level(module: Option<Module>, level: Level) {
    match module {
        Some(m) => LEVELS[m as usize].store(level as u8, Relaxed),
        None => {
            GLOBAL.store(level as u8, Relaxed);
            for l in &LEVELS {
                l.store(level as u8, Relaxed);
            }
        }
    }
    refresh();
}

/// Keeps `log`'s max level at the most verbose module level and the memory hook's log
/// bit in step with the `MEM` level.
fn refresh() {
    let most = Module::ALL.into_iter().map(level).min().unwrap_or(Level::Error);
    if INSTALLED.load(Relaxed) {
        log::set_max_level(most.filter());
    }
    crate::memory::events::set_logging(INSTALLED.load(Relaxed) && level(Module::Mem) <= Level::Warning);
}

/// Installs npurt's logger (once) and applies the environment ([`Settings::from_env`]);
/// true if npurt's logger is the installed one. Another `log` logger installed earlier
/// by the application keeps receiving the records (npurt then leaves its levels alone).
pub fn init() -> bool {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let ok = log::set_logger(&sink::LOGGER).is_ok();
        INSTALLED.store(ok, Relaxed);
        Settings::from_env().apply();
    });
    INSTALLED.load(Relaxed)
}

/// One record as the sinks and the bindings see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub level: Level,
    pub module: Module,
    pub message: String,
    /// Source file (npurt's path in the workspace, or the caller's file); the plog line
    /// shortens it.
    pub file: Cow<'static, str>,
    pub line: u32,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
    /// OS thread id and name of the logging thread.
    pub thread: u64,
    pub thread_name: Option<String>,
}

/// Logs `message` as if from `file:line` in `module` (the bindings' `acl.app_log` and
/// Python-side records), if the module's level lets it through.
pub fn log_from(module: Module, level: Level, message: &str, file: &str, line: u32) {
    if level == Level::Null || level < self::level(module) {
        return;
    }
    let lvl = match level {
        Level::Debug => log::Level::Debug,
        Level::Info => log::Level::Info,
        Level::Warning => log::Level::Warn,
        _ => log::Level::Error,
    };
    log::logger().log(
        &log::Record::builder()
            .args(format_args!("{message}"))
            .level(lvl)
            .target(module.name())
            .file(Some(file))
            .line(Some(line))
            .build(),
    );
}
