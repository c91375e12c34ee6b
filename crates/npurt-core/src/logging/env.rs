//! The logging environment variables, read once by [`super::init`]:
//!
//! | variable | meaning |
//! |---|---|
//! | `NPURT_LOG_LEVEL` | `debug`/`info`/`warning`/`error`/`off` (or 0–4), optionally with module overrides: `warning:RUNTIME=debug:MEM=info`. When set and valid it decides alone (the `ASCEND_*` levels are ignored). |
//! | `ASCEND_GLOBAL_LOG_LEVEL` | CANN's 0 debug … 3 error (default) … 4 null. Invalid or empty: the default. |
//! | `ASCEND_MODULE_LOG_LEVEL` | `MOD=lvl:MOD=lvl` (`RUNTIME=0:MEM=1`), overriding the global level per module. A format error or an unknown module makes the whole value ignored, as in CANN. |
//! | `ASCEND_LOG_PRINT_TO_STDOUT` | `1`: print plog lines to stdout (`ASCEND_SLOG_PRINT_TO_STDOUT`, deprecated in CANN, is read when it is unset). |
//! | `NPURT_LOG_FILE` | append plog lines to this file; it rotates at 20 MB (CANN's plog cap) into `FILE.1` … |
//! | `ASCEND_HOST_LOG_FILE_NUM` | files kept when rotating, 1–1000 (default 10). |
//!
//! An invalid value is ignored with one line on stderr and a warning record.

use super::{sink, Level, Module, MODULES};
use std::path::PathBuf;

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The level of every module not overridden.
    pub global: Level,
    /// Per-module overrides.
    pub modules: Vec<(Module, Level)>,
    pub print_stdout: bool,
    pub file: Option<PathBuf>,
    /// Files kept when `file` rotates (the live one included).
    pub file_count: usize,
    /// Invalid values that were ignored, one message each.
    pub warnings: Vec<String>,
}

/// A parsed level spec: the global level (if given) and the module overrides.
pub type Spec = (Option<Level>, Vec<(Module, Level)>);

/// Parses a level spec: `:`- or `,`-separated items, each `LEVEL` (the global level; only
/// if `global_allowed`) or `MODULE=LEVEL`. Returns (global, overrides) or what is wrong.
pub fn parse_spec(s: &str, global_allowed: bool) -> Result<Spec, String> {
    let mut global = None;
    let mut mods = Vec::new();
    let items: Vec<&str> = s.split([':', ',']).map(str::trim).filter(|i| !i.is_empty()).collect();
    if items.is_empty() {
        return Err("no level given".to_string());
    }
    for item in items {
        match item.split_once('=') {
            Some((m, l)) => {
                let module = Module::parse(m).ok_or_else(|| {
                    let names: Vec<&str> = Module::ALL.iter().map(|m| m.name()).collect();
                    format!("unknown module {:?} (modules: {})", m.trim(), names.join(", "))
                })?;
                let level = Level::parse(l).ok_or_else(|| format!("{:?} is not a log level", l.trim()))?;
                mods.push((module, level));
            }
            None if global_allowed => {
                global = Some(Level::parse(item).ok_or_else(|| format!("{item:?} is not a log level"))?);
            }
            None => return Err(format!("{item:?} is not MODULE=LEVEL")),
        }
    }
    Ok((global, mods))
}

fn flag(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

impl Settings {
    /// The settings `get` (an environment lookup) describes.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Settings {
        let mut s = Settings {
            global: Level::Error,
            modules: Vec::new(),
            print_stdout: false,
            file: None,
            file_count: 10,
            warnings: Vec::new(),
        };
        let levels = VALID_LEVELS;
        let npurt = get("NPURT_LOG_LEVEL").filter(|v| !v.trim().is_empty());
        let from_npurt = npurt.and_then(|v| match parse_spec(&v, true) {
            Ok((g, m)) => Some((g.unwrap_or(Level::Error), m)),
            Err(e) => {
                s.warnings
                    .push(format!("NPURT_LOG_LEVEL={v:?} ignored: {e} ({levels})"));
                None
            }
        });
        if let Some((g, m)) = from_npurt {
            (s.global, s.modules) = (g, m);
        } else {
            if let Some(v) = get("ASCEND_GLOBAL_LOG_LEVEL").filter(|v| !v.trim().is_empty()) {
                match v.trim().parse::<i64>().ok().and_then(Level::from_cann) {
                    Some(l) => s.global = l,
                    None => s.warnings.push(format!(
                        "ASCEND_GLOBAL_LOG_LEVEL={v:?} ignored: not 0 (debug) .. 4 (null); using 3 (error)"
                    )),
                }
            }
            if let Some(v) = get("ASCEND_MODULE_LOG_LEVEL").filter(|v| !v.trim().is_empty()) {
                match parse_spec(&v, false) {
                    Ok((_, m)) => s.modules = m,
                    Err(e) => s.warnings.push(format!("ASCEND_MODULE_LOG_LEVEL={v:?} ignored: {e}")),
                }
            }
        }
        let stdout = get("ASCEND_LOG_PRINT_TO_STDOUT")
            .map(|v| ("ASCEND_LOG_PRINT_TO_STDOUT", v))
            .or_else(|| get("ASCEND_SLOG_PRINT_TO_STDOUT").map(|v| ("ASCEND_SLOG_PRINT_TO_STDOUT", v)));
        if let Some((name, v)) = stdout.filter(|(_, v)| !v.trim().is_empty()) {
            match flag(&v) {
                Some(on) => s.print_stdout = on,
                None => s.warnings.push(format!("{name}={v:?} ignored: not 0 or 1")),
            }
        }
        s.file = get("NPURT_LOG_FILE")
            .filter(|v| !v.trim().is_empty())
            .map(PathBuf::from);
        if let Some(v) = get("ASCEND_HOST_LOG_FILE_NUM").filter(|v| !v.trim().is_empty()) {
            match v.trim().parse::<usize>() {
                Ok(n) if (1..=1000).contains(&n) => s.file_count = n,
                _ => s
                    .warnings
                    .push(format!("ASCEND_HOST_LOG_FILE_NUM={v:?} ignored: not 1..1000")),
            }
        }
        s
    }

    /// The process environment's settings.
    pub fn from_env() -> Settings {
        Settings::from_lookup(|k| std::env::var(k).ok())
    }

    /// The level of each module these settings give.
    pub fn levels(&self) -> [Level; MODULES] {
        let mut out = [self.global; MODULES];
        for &(m, l) in &self.modules {
            out[m as usize] = l;
        }
        out
    }

    /// Applies the settings; each ignored value is reported once (stderr and a warning).
    pub fn apply(&self) {
        super::set_level(None, self.global);
        for &(m, l) in &self.modules {
            super::set_level(Some(m), l);
        }
        sink::set_print_stdout(self.print_stdout);
        if let Some(path) = &self.file {
            if let Err(e) = sink::set_file(Some(path), self.file_count) {
                let msg = format!("NPURT_LOG_FILE={path:?} ignored: {e}");
                eprintln!("npurt: {msg}");
                log::warn!("{msg}");
            }
        }
        for w in &self.warnings {
            eprintln!("npurt: {w}");
            log::warn!("{w}");
        }
    }
}

const VALID_LEVELS: &str = "levels: debug, info, warning, error, off or 0-4";

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_and_cann_numbers() {
        let s = settings(&[]);
        assert_eq!(s.levels(), [Level::Error; MODULES]);
        assert!(!s.print_stdout && s.file.is_none() && s.warnings.is_empty());
        assert_eq!(settings(&[("ASCEND_GLOBAL_LOG_LEVEL", "1")]).global, Level::Info);
        assert_eq!(settings(&[("ASCEND_GLOBAL_LOG_LEVEL", "4")]).global, Level::Null);
        let bad = settings(&[("ASCEND_GLOBAL_LOG_LEVEL", "7")]);
        assert_eq!((bad.global, bad.warnings.len()), (Level::Error, 1));
        assert!(settings(&[("ASCEND_GLOBAL_LOG_LEVEL", "")]).warnings.is_empty());
    }

    #[test]
    fn module_levels_all_or_nothing() {
        let s = settings(&[
            ("ASCEND_GLOBAL_LOG_LEVEL", "2"),
            ("ASCEND_MODULE_LOG_LEVEL", "RUNTIME=0:MEM=1"),
        ]);
        let l = s.levels();
        assert_eq!((l[0], l[1], l[2]), (Level::Debug, Level::Info, Level::Warning));
        // An unknown module or a format error drops the whole value (CANN's rule).
        for bad in ["RUNTIME=0:TBEX=1", "RUNTIME=0:MEM", "RUNTIME=9"] {
            let s = settings(&[("ASCEND_MODULE_LOG_LEVEL", bad)]);
            assert_eq!(s.levels(), [Level::Error; MODULES], "{bad}");
            assert_eq!(s.warnings.len(), 1, "{bad}");
        }
    }

    #[test]
    fn npurt_level_wins() {
        let s = settings(&[
            ("NPURT_LOG_LEVEL", "info"),
            ("ASCEND_GLOBAL_LOG_LEVEL", "0"),
            ("ASCEND_MODULE_LOG_LEVEL", "MEM=0"),
        ]);
        assert_eq!(s.levels(), [Level::Info; MODULES]);
        let s = settings(&[("NPURT_LOG_LEVEL", "warning:runtime=debug,MEM=info")]);
        assert_eq!(&s.levels()[..3], &[Level::Debug, Level::Info, Level::Warning]);
        assert_eq!(settings(&[("NPURT_LOG_LEVEL", "OFF")]).global, Level::Null);
        // Invalid: ignored, the ASCEND_ variables apply.
        let s = settings(&[("NPURT_LOG_LEVEL", "verbose"), ("ASCEND_GLOBAL_LOG_LEVEL", "1")]);
        assert_eq!((s.global, s.warnings.len()), (Level::Info, 1));
        assert!(s.warnings[0].contains("NPURT_LOG_LEVEL"));
    }

    #[test]
    fn stdout_file_and_count() {
        assert!(settings(&[("ASCEND_LOG_PRINT_TO_STDOUT", "1")]).print_stdout);
        assert!(settings(&[("ASCEND_SLOG_PRINT_TO_STDOUT", "1")]).print_stdout);
        let both = settings(&[
            ("ASCEND_LOG_PRINT_TO_STDOUT", "0"),
            ("ASCEND_SLOG_PRINT_TO_STDOUT", "1"),
        ]);
        assert!(!both.print_stdout, "the new name wins");
        assert_eq!(settings(&[("ASCEND_LOG_PRINT_TO_STDOUT", "maybe")]).warnings.len(), 1);
        let f = settings(&[("NPURT_LOG_FILE", "/tmp/x.log"), ("ASCEND_HOST_LOG_FILE_NUM", "3")]);
        assert_eq!(
            (f.file.as_deref(), f.file_count),
            (Some(std::path::Path::new("/tmp/x.log")), 3)
        );
        assert_eq!(settings(&[("ASCEND_HOST_LOG_FILE_NUM", "0")]).warnings.len(), 1);
    }
}
