//! The native API's configuration file: a policy name and its `key=value` tunables.
//!
//! ```text
//! # comments start with '#'; blank lines are ignored
//! policy = wfq
//! weight.1 = 500
//! weight.2 = 1500
//! ```
//!
//! One `policy` line is required; every other line is a tunable of that policy, validated by the
//! registry exactly as options given to `iosets_create` are. Not libconfig (that is the AGIOS shim's
//! format, see [`crate::agios`]): one setting per line, nothing nested.

use std::path::Path;

/// What is wrong with a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    /// A line is not `key = value`.
    #[error("{path}:{line}: expected `key = value`, found {text:?}")]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The line's text.
        text: String,
    },
    /// No `policy = NAME` line.
    #[error("{path}: no `policy = NAME` line")]
    NoPolicy {
        /// The file.
        path: String,
    },
    /// Two `policy` lines.
    #[error("{path}:{line}: `policy` given twice")]
    TwoPolicies {
        /// The file.
        path: String,
        /// 1-based line number of the second one.
        line: usize,
    },
}

/// Reads `path` into the policy name and its tunables, in file order.
///
/// # Errors
/// [`ConfigError`] if the file cannot be read or a line is malformed. Tunable names and values are
/// not checked here; the registry checks them when the policy is built.
pub fn parse_options_file(path: &Path) -> Result<(String, Vec<(String, String)>), ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Unreadable {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    parse_options_text(&shown, &text)
}

pub(crate) fn parse_options_text(
    shown: &str,
    text: &str,
) -> Result<(String, Vec<(String, String)>), ConfigError> {
    let mut policy: Option<String> = None;
    let mut pairs = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(ConfigError::Syntax {
                path: shown.to_string(),
                line: i + 1,
                text: raw.to_string(),
            });
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(ConfigError::Syntax {
                path: shown.to_string(),
                line: i + 1,
                text: raw.to_string(),
            });
        }
        if k == "policy" {
            if policy.is_some() {
                return Err(ConfigError::TwoPolicies {
                    path: shown.to_string(),
                    line: i + 1,
                });
            }
            policy = Some(v.to_string());
        } else {
            pairs.push((k.to_string(), v.to_string()));
        }
    }
    let policy = policy.ok_or_else(|| ConfigError::NoPolicy {
        path: shown.to_string(),
    })?;
    Ok((policy, pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_policy_and_tunables_in_order() {
        let (p, pairs) =
            parse_options_text("f", "# c\npolicy = wfq\n\nweight.1 = 5 # five\nkey=job\n").unwrap();
        assert_eq!(p, "wfq");
        assert_eq!(
            pairs,
            vec![
                ("weight.1".to_string(), "5".to_string()),
                ("key".to_string(), "job".to_string())
            ]
        );
    }

    #[test]
    fn malformed_lines_and_missing_policy_are_errors() {
        assert!(matches!(
            parse_options_text("f", "policy = noop\nnonsense\n"),
            Err(ConfigError::Syntax { line: 2, .. })
        ));
        assert!(matches!(
            parse_options_text("f", "weight.1 = 2\n"),
            Err(ConfigError::NoPolicy { .. })
        ));
        assert!(matches!(
            parse_options_text("f", "policy = a\npolicy = b\n"),
            Err(ConfigError::TwoPolicies { line: 2, .. })
        ));
        assert!(matches!(
            parse_options_text("f", " = 3\npolicy = noop\n"),
            Err(ConfigError::Syntax { line: 1, .. })
        ));
    }
}
