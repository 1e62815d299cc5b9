//! Fair-share weights and what the control plane tells of jobs (Slurm account, node count): kept
//! by the runtime, applied to the policy and re-applied to a policy switched in
//! ([`crate::Scheduler::set_shares`], [`crate::Scheduler::set_job_info`]). The policy's side
//! is [`iosets_policy::fairshare`].
//!
//! # Text forms
//! A node of the tree is `level=name`: `account=physics` (a Slurm account name), `user=alice` or
//! `user=1000` (a name is looked up through the system's name service when the share is read,
//! and kept as its uid), `set=0.1` (IO-SETS' set of that priority), `job=42` (a job id;
//! `iosets ctl` turns a job name into its id first).
//! In a quota file, the configuration's `[quota]` or the state file:
//! ```toml
//! [[share]]
//! node = "account=physics"
//! weight = 3
//! ```

use std::fmt;

pub use iosets_policy::fairshare::{account_key, JobInfo, ShareLevel};

use crate::RuntimeError;

/// The longest account name accepted, in bytes (Slurm's own limit is lower).
pub const MAX_ACCOUNT_LEN: usize = 64;

/// The most jobs whose account or node count is kept at once; a job the control plane tells of
/// beyond it is refused (SPANK's epilog clears a job's record when it ends).
pub const MAX_JOB_INFO: usize = iosets_policy::wfq::MAX_JOB_INFO;

/// A node of the fair-share tree and its weight.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareSpec {
    /// Its level.
    pub level: ShareLevel,
    /// As the admin named it (an account, a user name or uid, a job id).
    pub name: String,
    /// Its key in the tree: [`account_key`] of the name, the uid, the job id.
    pub key: u64,
    /// Its weight among its siblings, > 0.
    pub weight: f64,
}

impl ShareSpec {
    /// The node `node` (`level=name`, see the [module documentation](self)) with `weight`.
    ///
    /// # Errors
    /// A message naming the node: an unknown level, a bad name, an unknown user, a weight that
    /// is not a finite number > 0.
    pub fn parse(node: &str, weight: f64) -> Result<ShareSpec, String> {
        let (level, key, name) = parse_node(node)?;
        if !(weight.is_finite() && weight > 0.0) {
            return Err(format!(
                "share `{node}`: the weight must be a finite number > 0, not {weight}"
            ));
        }
        Ok(ShareSpec {
            level,
            name,
            key,
            weight,
        })
    }

    /// The node in its text form, `level=name`.
    pub fn node(&self) -> String {
        format!("{}={}", self.level, self.name)
    }
}

impl fmt::Display for ShareSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.node(), self.weight)
    }
}

/// Parses a node, `level=name`: its level, key and name (a user name is kept as given).
///
/// # Errors
/// A message naming the node.
pub fn parse_node(node: &str) -> Result<(ShareLevel, u64, String), String> {
    let Some((level, name)) = node.split_once('=') else {
        return Err(format!(
            "share node `{node}` is not level=name (account=NAME, user=NAME|UID, set=PRIORITY, \
             job=ID)"
        ));
    };
    let level: ShareLevel = level
        .trim()
        .parse()
        .map_err(|e| format!("share node `{node}`: {e}"))?;
    let name = name.trim();
    let key = match level {
        ShareLevel::Account => {
            check_account(name).map_err(|e| format!("share node `{node}`: {e}"))?;
            account_key(name)
        }
        ShareLevel::User => match name.parse::<u32>() {
            Ok(uid) => u64::from(uid),
            Err(_) => match crate::quota::user_id(name) {
                Ok(Some(uid)) => u64::from(uid),
                Ok(None) => {
                    return Err(format!(
                        "share node `{node}`: no user `{name}` on this server (a number is taken \
                         as a uid)"
                    ))
                }
                Err(e) => return Err(format!("share node `{node}`: looking up `{name}`: {e}")),
            },
        },
        ShareLevel::Set => match name.parse::<f64>() {
            Ok(p) if p.is_finite() && p > 0.0 => p.to_bits(),
            _ => {
                return Err(format!(
                    "share node `{node}`: a set is named by its priority, a number > 0 (set=0.1)"
                ))
            }
        },
        ShareLevel::Job => name.parse::<u64>().map_err(|_| {
            format!("share node `{node}`: a job is named by its id here (iosets ctl takes names)")
        })?,
    };
    Ok((level, key, name.to_owned()))
}

/// Checks an account name: 1 to [`MAX_ACCOUNT_LEN`] letters, digits, `-`, `_` or `.`.
///
/// # Errors
/// What is wrong with it.
pub fn check_account(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > MAX_ACCOUNT_LEN
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "`{name}` is not an account name (1 to {MAX_ACCOUNT_LEN} letters, digits, `-`, `_` \
             or `.`)"
        ));
    }
    Ok(())
}

/// Checks a list of shares: no node given twice.
///
/// # Errors
/// [`RuntimeError::Share`] naming the node.
pub fn check_shares(shares: &[ShareSpec]) -> Result<(), RuntimeError> {
    for (i, s) in shares.iter().enumerate() {
        if !(s.weight.is_finite() && s.weight > 0.0) {
            return Err(RuntimeError::Share {
                node: s.node(),
                reason: format!("the weight must be a finite number > 0, not {}", s.weight),
            });
        }
        if let Some(earlier) = shares[..i]
            .iter()
            .find(|e| e.level == s.level && e.key == s.key)
        {
            return Err(RuntimeError::Share {
                node: s.node(),
                reason: format!("given twice (also as `{}`)", earlier.node()),
            });
        }
    }
    Ok(())
}

/// A share as a quota file, the configuration's `[quota]` or the state file writes it.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TomlShare {
    /// `level=name`.
    pub node: String,
    /// Its weight.
    pub weight: f64,
}

impl TomlShare {
    /// The share it describes.
    ///
    /// # Errors
    /// [`RuntimeError::Share`] naming the node.
    pub fn to_spec(&self) -> Result<ShareSpec, RuntimeError> {
        ShareSpec::parse(&self.node, self.weight).map_err(|reason| {
            // The error names the node itself: keep it once.
            let named = [
                format!("share `{}`: ", self.node),
                format!("share node `{}`: ", self.node),
            ];
            let reason = named
                .iter()
                .find_map(|p| reason.strip_prefix(p.as_str()))
                .map_or(reason.clone(), str::to_owned);
            RuntimeError::Share {
                node: self.node.clone(),
                reason,
            }
        })
    }
}

impl From<&ShareSpec> for TomlShare {
    fn from(s: &ShareSpec) -> TomlShare {
        TomlShare {
            node: s.node(),
            weight: s.weight,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_parse_by_level() {
        let a = ShareSpec::parse("account=physics", 3.0).unwrap();
        assert_eq!(
            (a.level, a.key, a.node()),
            (
                ShareLevel::Account,
                account_key("physics"),
                "account=physics".into()
            )
        );
        let u = ShareSpec::parse("user=root", 2.0).unwrap();
        assert_eq!((u.level, u.key), (ShareLevel::User, 0));
        assert_eq!(ShareSpec::parse("user=1000", 1.0).unwrap().key, 1000);
        assert_eq!(ShareSpec::parse("job=42", 1.0).unwrap().key, 42);
        assert_eq!(
            ShareSpec::parse("set=0.1", 5.0).unwrap().key,
            0.1f64.to_bits()
        );
        assert!(ShareSpec::parse("set=0", 5.0)
            .unwrap_err()
            .contains("by its priority"));
        let back = TomlShare::from(&a).to_spec().unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn bad_shares_name_the_node() {
        for (node, weight, needle) in [
            ("account=physics", 0.0, "finite number > 0"),
            ("account=physics", -1.0, "finite number > 0"),
            ("account=physics", f64::NAN, "finite number > 0"),
            ("project=x", 1.0, "unknown level `project`"),
            ("physics", 1.0, "not level=name"),
            ("account=", 1.0, "not an account name"),
            ("account=a b", 1.0, "not an account name"),
            (
                "user=no-such-user-iosets",
                1.0,
                "no user `no-such-user-iosets`",
            ),
            ("job=dd.1000", 1.0, "by its id"),
        ] {
            let e = ShareSpec::parse(node, weight).unwrap_err();
            assert!(e.contains(node) && e.contains(needle), "{node}: {e}");
        }
        let twice = [
            ShareSpec::parse("user=root", 1.0).unwrap(),
            ShareSpec::parse("user=0", 2.0).unwrap(),
        ];
        let e = check_shares(&twice).unwrap_err().to_string();
        assert!(e.contains("user=0") && e.contains("twice"), "{e}");
    }
}
