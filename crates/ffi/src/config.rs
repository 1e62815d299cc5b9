//! The native API's configuration file, in TOML like the server's `iosets.toml`: the policy, its
//! tunables, and the job book's settings.
//!
//! ```toml
//! policy = "wfq"
//! auto_priority = false   # detect each job's period, move it to its Set-10 priority
//! forget_idle_s = 600     # forget a job idle this long (its statistics, automatic priority)
//!
//! [policy_options]        # the policy's tunables, validated by the registry
//! "weight.1" = 500        # a quoted key; the dotted form weight.1 = 500 means the same
//! weight.2 = 1500
//! ```
//!
//! `policy` is required; unknown keys are errors. The `key = value` lines of libiosets 0.1 (`policy
//! = wfq`, one unquoted tunable per line) are not read any more: such a file is refused with an
//! error that names its first old-style line and shows the TOML form.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// What is wrong with a configuration file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Unreadable {
        /// The path given.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// The file is not valid TOML, or a key is unknown or has the wrong type.
    #[error("{path}:{line}: {message}")]
    Toml {
        /// The file.
        path: String,
        /// 1-based line number of the error.
        line: usize,
        /// What the TOML reader said.
        message: String,
    },
    /// The file is in the `key = value` format of libiosets 0.1.
    #[error(
        "{path}:{line}: {text:?} is the old `key = value` format; the file is TOML now: \
         write `policy = \"wfq\"` and the tunables under `[policy_options]`, e.g. \
         `\"weight.1\" = 500` (see crates/ffi/README.md)"
    )]
    OldFormat {
        /// The file.
        path: String,
        /// 1-based line number of the first line that is not TOML.
        line: usize,
        /// The line's text.
        text: String,
    },
    /// No `policy` key.
    #[error("{path}: no `policy = \"NAME\"` key")]
    NoPolicy {
        /// The file.
        path: String,
    },
    /// A setting has an unusable value.
    #[error("{path}: {key}: {problem}")]
    BadValue {
        /// The file.
        path: String,
        /// The key.
        key: String,
        /// What is wrong.
        problem: String,
    },
}

/// A parsed configuration file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileConfig {
    /// The policy's registry name.
    pub policy: String,
    /// Its tunables, `key=value`, in file order (nested tables flattened to dotted names).
    pub options: Vec<(String, String)>,
    /// Automatic priorities from detected periods (`auto_priority`, default false).
    pub auto_priority: bool,
    /// How long an idle job is remembered (`forget_idle_s`; the runtime's default when absent).
    pub forget_idle: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    policy: Option<String>,
    auto_priority: Option<bool>,
    forget_idle_s: Option<f64>,
    policy_options: Option<toml::Table>,
}

/// Reads the configuration file at `path`.
///
/// # Errors
/// [`ConfigError`] if the file cannot be read, is not TOML (naming the line), is in the old
/// `key = value` format, lacks `policy`, or has an unknown key or an unusable value. Tunable names
/// and values are not checked here; the registry checks them when the policy is built.
pub fn parse_options_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Unreadable {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    parse_options_text(&shown, &text)
}

pub(crate) fn parse_options_text(shown: &str, text: &str) -> Result<FileConfig, ConfigError> {
    let raw: Raw = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |sp| {
            text[..sp.start.min(text.len())].lines().count().max(1)
        });
        match old_format_line(text) {
            Some((line, old)) => ConfigError::OldFormat {
                path: shown.to_string(),
                line,
                text: old.to_string(),
            },
            None => ConfigError::Toml {
                path: shown.to_string(),
                line,
                message: e.message().trim().to_string(),
            },
        }
    })?;
    let policy = raw.policy.ok_or_else(|| ConfigError::NoPolicy {
        path: shown.to_string(),
    })?;
    let forget_idle = match raw.forget_idle_s {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(ConfigError::BadValue {
                path: shown.to_string(),
                key: "forget_idle_s".into(),
                problem: format!("{s} is not a number of seconds > 0 (and ≤ 1e9)"),
            })
        }
    };
    let mut options = Vec::new();
    if let Some(table) = raw.policy_options {
        flatten(shown, "", &table, &mut options)?;
    }
    Ok(FileConfig {
        policy,
        options,
        auto_priority: raw.auto_priority.unwrap_or(false),
        forget_idle,
    })
}

/// Tunables as `key=value` strings; `weight.1 = 5` (a nested table in TOML) becomes `weight.1`.
fn flatten(
    shown: &str,
    prefix: &str,
    table: &toml::Table,
    out: &mut Vec<(String, String)>,
) -> Result<(), ConfigError> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let value = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Table(t) => {
                flatten(shown, &key, t, out)?;
                continue;
            }
            other => {
                return Err(ConfigError::BadValue {
                    path: shown.to_string(),
                    key: format!("policy_options.{key}"),
                    problem: format!("{other} is not a string, number or boolean"),
                })
            }
        };
        out.push((key, value));
    }
    Ok(())
}

/// The first line that reads as the old format (`key = bare value`, which TOML refuses), if the
/// whole file reads as the old format.
fn old_format_line(text: &str) -> Option<(usize, &str)> {
    let mut first = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (k, v) = line.split_once('=')?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || k.starts_with('[') || v.is_empty() {
            return None;
        }
        if first.is_none() && toml::from_str::<toml::Table>(line).is_err() {
            first = Some((i + 1, raw));
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_policy_tunables_and_book_settings() {
        let c = parse_options_text(
            "f",
            "# c\npolicy = \"wfq\"\nauto_priority = true\nforget_idle_s = 2.5\n\n\
             [policy_options]\n\"weight.1\" = 5 # five\nkey = \"job\"\nweight.2 = 7\n",
        )
        .unwrap();
        assert_eq!(c.policy, "wfq");
        assert!(c.auto_priority);
        assert_eq!(c.forget_idle, Some(Duration::from_millis(2500)));
        let mut opts = c.options.clone();
        opts.sort();
        assert_eq!(
            opts,
            vec![
                ("key".to_string(), "job".to_string()),
                ("weight.1".to_string(), "5".to_string()),
                ("weight.2".to_string(), "7".to_string()),
            ]
        );
        let c = parse_options_text("f", "policy = \"noop\"").unwrap();
        assert!(!c.auto_priority);
        assert_eq!(c.forget_idle, None);
        assert!(c.options.is_empty());
    }

    #[test]
    fn the_old_format_is_refused_naming_its_line() {
        let e = parse_options_text("f", "# old\npolicy = wfq\nweight.1 = 5\n").unwrap_err();
        assert!(
            matches!(&e, ConfigError::OldFormat { line: 2, text, .. } if text == "policy = wfq"),
            "{e:?}"
        );
        assert!(e.to_string().contains("f:2:"), "{e}");
        assert!(e.to_string().contains("[policy_options]"), "{e}");
    }

    #[test]
    fn bad_files_are_errors_naming_the_line() {
        assert!(matches!(
            parse_options_text("f", "policy = \"noop\"\nnonsense\n"),
            Err(ConfigError::Toml { line: 2, .. })
        ));
        assert!(matches!(
            parse_options_text("f", "[policy_options]\nweight.1 = 2\n"),
            Err(ConfigError::NoPolicy { .. })
        ));
        assert!(matches!(
            parse_options_text("f", "policy = \"a\"\npolicy = \"b\"\n"),
            Err(ConfigError::Toml { message, .. }) if message.contains("duplicate key")
        ));
        assert!(matches!(
            parse_options_text("f", "policy = \"a\"\nworkers = 3\n"),
            Err(ConfigError::Toml { .. })
        ));
        assert!(matches!(
            parse_options_text("f", "policy = \"a\"\nforget_idle_s = -1\n"),
            Err(ConfigError::BadValue { .. })
        ));
        assert!(matches!(
            parse_options_text("f", "policy = \"a\"\n[policy_options]\nw = [1, 2]\n"),
            Err(ConfigError::BadValue { .. })
        ));
    }
}
