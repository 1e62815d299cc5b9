//! Validated `key=value` tunables.
//!
//! Each policy declares its tunables as a static list of [`TunableSpec`]s (name, default, unit and
//! meaning); a builder reads them through [`Tunables`], which parses each value into its type and,
//! in [`Tunables::finish`], rejects any key the policy did not read, naming the valid ones. A value
//! is never clamped: out of range is an error.

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::PolicyError;

/// One tunable a policy accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunableSpec {
    /// Its key. A key ending in `.<...>` (as `weight.<queue>`) is a family: any suffix is accepted.
    pub name: &'static str,
    /// The default, as text.
    pub default: &'static str,
    /// What it means, with its unit.
    pub help: &'static str,
}

impl TunableSpec {
    /// The fixed part of a family key (`"weight."` for `"weight.<queue>"`), or `None`.
    pub fn family_prefix(&self) -> Option<&'static str> {
        self.name.find(".<").map(|i| &self.name[..=i])
    }

    fn accepts(&self, key: &str) -> bool {
        match self.family_prefix() {
            Some(p) => key.len() > p.len() && key.starts_with(p),
            None => key == self.name,
        }
    }
}

/// Splits `key=value` arguments into pairs; an argument with no `=` or an empty key is an error.
pub fn parse_pairs<S: AsRef<str>>(args: &[S]) -> Result<Vec<(String, String)>, PolicyError> {
    args.iter()
        .map(|a| {
            let a = a.as_ref();
            match a.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    Ok((k.trim().to_string(), v.trim().to_string()))
                }
                _ => Err(PolicyError::Malformed { arg: a.to_string() }),
            }
        })
        .collect()
}

/// The tunables given to one policy under construction.
#[derive(Debug)]
pub struct Tunables {
    policy: &'static str,
    specs: &'static [TunableSpec],
    given: BTreeMap<String, String>,
}

impl Tunables {
    /// Collects `pairs` for `policy`, whose accepted keys are `specs`. Repeated keys are an error.
    pub fn new(
        policy: &'static str,
        specs: &'static [TunableSpec],
        pairs: &[(String, String)],
    ) -> Result<Tunables, PolicyError> {
        let mut given = BTreeMap::new();
        for (k, v) in pairs {
            if given.insert(k.clone(), v.clone()).is_some() {
                return Err(PolicyError::Duplicate {
                    policy,
                    key: k.clone(),
                });
            }
        }
        let t = Tunables {
            policy,
            specs,
            given,
        };
        if let Some(k) = t
            .given
            .keys()
            .find(|k| !t.specs.iter().any(|s| s.accepts(k)))
        {
            return Err(t.unknown(k));
        }
        Ok(t)
    }

    fn unknown(&self, key: &str) -> PolicyError {
        PolicyError::UnknownTunable {
            policy: self.policy,
            key: key.to_string(),
            known: self.specs.iter().map(|s| s.name).collect(),
        }
    }

    fn bad(&self, key: &str, value: &str, expected: impl Into<String>) -> PolicyError {
        PolicyError::BadValue {
            policy: self.policy,
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }

    fn spec(&self, key: &str) -> &'static TunableSpec {
        self.specs
            .iter()
            .find(|s| s.name == key)
            .unwrap_or_else(|| panic!("policy {} reads undeclared tunable {key}", self.policy))
    }

    fn raw(&mut self, key: &str) -> String {
        let spec = self.spec(key);
        self.given
            .remove(key)
            .unwrap_or_else(|| spec.default.to_string())
    }

    fn parsed<T: FromStr>(&mut self, key: &str, expected: &str) -> Result<T, PolicyError> {
        let v = self.raw(key);
        v.parse().map_err(|_| self.bad(key, &v, expected))
    }

    /// The value as given (or the default), for a caller that parses it itself; report what is
    /// wrong with it through [`Tunables::bad_value`].
    pub fn raw_str(&mut self, key: &str) -> String {
        self.raw(key)
    }

    /// The error for `value` of `key`, saying what was `expected`.
    pub fn bad_value(&self, key: &str, value: &str, expected: impl Into<String>) -> PolicyError {
        self.bad(key, value, expected)
    }

    /// A boolean (`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`).
    pub fn bool(&mut self, key: &str) -> Result<bool, PolicyError> {
        let v = self.raw(key);
        match v.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(self.bad(key, &v, "true or false")),
        }
    }

    /// An unsigned integer in `[min, max]`.
    pub fn u64_in(&mut self, key: &str, min: u64, max: u64) -> Result<u64, PolicyError> {
        let expected = format!("an integer from {min} to {max}");
        let v: u64 = self.parsed(key, &expected)?;
        if (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(self.bad(key, &v.to_string(), expected))
        }
    }

    /// `auto` (as `None`) or an unsigned integer in `[min, max]`.
    pub fn u64_in_or_auto(
        &mut self,
        key: &str,
        min: u64,
        max: u64,
    ) -> Result<Option<u64>, PolicyError> {
        let v = self.raw(key);
        if v.eq_ignore_ascii_case("auto") {
            return Ok(None);
        }
        let expected = format!("auto or an integer from {min} to {max}");
        match v.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(self.bad(key, &v, expected)),
        }
    }

    /// A finite number strictly greater than zero.
    pub fn positive_f64(&mut self, key: &str) -> Result<f64, PolicyError> {
        let v = self.raw(key);
        parse_positive(&v).ok_or_else(|| self.bad(key, &v, "a finite number > 0"))
    }

    /// One of `choices`.
    pub fn choice(
        &mut self,
        key: &str,
        choices: &[&'static str],
    ) -> Result<&'static str, PolicyError> {
        let v = self.raw(key);
        choices
            .iter()
            .find(|c| c.eq_ignore_ascii_case(&v))
            .copied()
            .ok_or_else(|| self.bad(key, &v, format!("one of {}", choices.join(", "))))
    }

    /// Every given key of the family `prefix.<suffix>`, as (suffix parsed as `u64`, value > 0).
    pub fn family_positive_f64(&mut self, prefix: &str) -> Result<Vec<(u64, f64)>, PolicyError> {
        let keys: Vec<String> = self
            .given
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let v = self.given.remove(&k).unwrap_or_default();
            let id: u64 = k[prefix.len()..]
                .parse()
                .map_err(|_| self.bad(&k, &v, format!("a key {prefix}<integer id>")))?;
            let w = parse_positive(&v).ok_or_else(|| self.bad(&k, &v, "a finite number > 0"))?;
            out.push((id, w));
        }
        Ok(out)
    }

    /// Ends construction: every given key must have been read.
    pub fn finish(self) -> Result<(), PolicyError> {
        match self.given.keys().next() {
            Some(k) => Err(self.unknown(k)),
            None => Ok(()),
        }
    }
}

fn parse_positive(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[TunableSpec] = &[
        TunableSpec {
            name: "merge",
            default: "false",
            help: "",
        },
        TunableSpec {
            name: "max_merge_bytes",
            default: "1048576",
            help: "",
        },
        TunableSpec {
            name: "weight.<queue>",
            default: "",
            help: "",
        },
    ];

    fn pairs(args: &[&str]) -> Vec<(String, String)> {
        parse_pairs(args).unwrap()
    }

    #[test]
    fn defaults_apply_and_values_parse() {
        let mut t = Tunables::new("x", SPECS, &pairs(&["merge=yes", "weight.3=2.5"])).unwrap();
        assert!(t.bool("merge").unwrap());
        assert_eq!(t.u64_in("max_merge_bytes", 1, u64::MAX).unwrap(), 1_048_576);
        assert_eq!(t.family_positive_f64("weight.").unwrap(), vec![(3, 2.5)]);
        t.finish().unwrap();
    }

    #[test]
    fn unknown_key_lists_valid_ones() {
        let err = Tunables::new("x", SPECS, &pairs(&["merg=true"])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("merg"), "{msg}");
        assert!(
            msg.contains("max_merge_bytes") && msg.contains("weight.<queue>"),
            "{msg}"
        );
    }

    #[test]
    fn bad_values_are_errors_not_clamps() {
        let mut t = Tunables::new("x", SPECS, &pairs(&["max_merge_bytes=0"])).unwrap();
        assert!(t.u64_in("max_merge_bytes", 1, 100).is_err());
        let mut t = Tunables::new("x", SPECS, &pairs(&["merge=maybe"])).unwrap();
        assert!(t.bool("merge").is_err());
        let mut t = Tunables::new("x", SPECS, &pairs(&["weight.1=-2"])).unwrap();
        assert!(t.family_positive_f64("weight.").is_err());
        let mut t = Tunables::new("x", SPECS, &pairs(&["weight.a=2"])).unwrap();
        assert!(t.family_positive_f64("weight.").is_err());
        assert!(Tunables::new("x", SPECS, &pairs(&["weight.=2"])).is_err());
    }

    #[test]
    fn malformed_and_duplicate_args_are_errors() {
        assert!(matches!(
            parse_pairs(&["merge"]),
            Err(PolicyError::Malformed { .. })
        ));
        assert!(matches!(
            parse_pairs(&["=1"]),
            Err(PolicyError::Malformed { .. })
        ));
        let err = Tunables::new("x", SPECS, &pairs(&["merge=1", "merge=0"])).unwrap_err();
        assert!(matches!(err, PolicyError::Duplicate { .. }));
    }
}
