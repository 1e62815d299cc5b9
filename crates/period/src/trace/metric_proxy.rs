//! The metric proxy's MessagePack trace export: what the TAU metric proxy (`proxy_v2`) sends
//! FTIO's ZeroMQ server (FTIO's `ftio/api/metric_proxy/proxy_zmq.py`, its example
//! `examples/API/proxy/trace_export.msgpack`), read with `rmp-serde`.
//!
//! The file is one MessagePack map, with named fields (the proxy's `src/ftio.rs` `Payload`,
//! `src/trace.rs` `TraceExport`):
//!
//! `{"argv": [...], "metrics": {"infos": ..., "metrics": {NAME: [[t, value], ...], ...}},
//! "disable_parallel": bool}`
//!
//! or the export alone, `{"infos": ..., "metrics": {NAME: [...], ...}}`. Each metric is a time
//! series of `[t, value]` pairs, `t` in seconds since the job's first sample; a counter's value
//! is its running total, and the proxy adds its derivative as `deriv__NAME`.
//!
//! FTIO runs its analysis on every metric of the message, whatever it measures (CPU usage, MPI
//! call counts, ...). Only two of them are I/O bytes with a direction: the totals of the
//! proxy's strace exporter (`exporters/strace/src/count.c`), `total___strace___size___write`
//! and `total___strace___size___read`, the bytes returned by every write-like and read-like
//! system call (`write`, `pwrite`, `writev`, `send`, ... and `read`, `pread`, `readv`,
//! `recv`, ...; sockets included). Those two are read: each rise of a counter from one sample
//! to the next is an event of that many bytes over that interval. Every other metric is
//! ignored; a message with neither counter is [`Error::Empty`], naming the metrics it has.

use std::io::Cursor;

use iosets_types::JobId;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::event::{Direction, JobEvent};
use crate::trace::msgpack::kind;
use crate::trace::{event, Format};

const F: Format = Format::MetricProxy;

/// The byte counters read, with their direction.
pub const COUNTERS: [(&str, Direction); 2] = [
    ("total___strace___size___write", Direction::Write),
    ("total___strace___size___read", Direction::Read),
];

/// The events of a metric proxy message.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<JobEvent>> {
    let err = |message: String| Error::Decode {
        format: F,
        record: 1,
        offset: 0,
        message,
    };
    let mut de = rmp_serde::Deserializer::new(Cursor::new(bytes));
    let top =
        Value::deserialize(&mut de).map_err(|e| err(format!("not a MessagePack value ({e})")))?;
    let end = usize::try_from(de.position()).unwrap_or(usize::MAX);
    if end < bytes.len() {
        return Err(Error::Decode {
            format: F,
            record: 2,
            offset: end,
            message: format!(
                "{} bytes after the message (a metric proxy export is one map)",
                bytes.len() - end
            ),
        });
    }
    let metrics = metrics(&top).map_err(err)?;
    let mut out = Vec::new();
    for (name, dir) in COUNTERS {
        if let Some(series) = metrics.get(name) {
            counter(name, series, dir, &mut out).map_err(err)?;
        }
    }
    if out.is_empty() {
        let names: Vec<&str> = metrics.keys().map(String::as_str).take(5).collect();
        return Err(Error::Empty {
            format: F,
            detail: format!(
                "no rise in {} or {} (the strace exporter's byte counters); its {} metric(s): \
                 {}{}",
                COUNTERS[0].0,
                COUNTERS[1].0,
                metrics.len(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                },
                if metrics.len() > names.len() {
                    ", ..."
                } else {
                    ""
                }
            ),
        });
    }
    Ok(out)
}

/// The metrics map of the message or of the bare export.
fn metrics(top: &Value) -> Result<&Map<String, Value>, String> {
    let Some(top) = top.as_object() else {
        return Err(format!(
            "expected a metric proxy export (a map with \"metrics\"), found {}",
            kind(top)
        ));
    };
    let Some(metrics) = top.get("metrics") else {
        return Err(format!(
            "no \"metrics\" field (found {})",
            keys(top.keys().map(String::as_str))
        ));
    };
    let Some(metrics) = metrics.as_object() else {
        return Err(format!("\"metrics\" is {}, not a map", kind(metrics)));
    };
    // The whole message holds the export ("infos" and "metrics"), whose "metrics" is the map
    // of series; the bare export's "metrics" is that map itself.
    if !metrics.contains_key("infos") {
        return Ok(metrics);
    }
    match metrics.get("metrics") {
        Some(Value::Object(series)) => Ok(series),
        Some(v) => Err(format!(
            "\"metrics\".\"metrics\" is {}, not a map of series",
            kind(v)
        )),
        None => Err("the export (with \"infos\") has no \"metrics\" map of series".into()),
    }
}

/// The events of one running total: a rise of `v[i] - v[i-1]` bytes from `t[i-1]` to `t[i]`.
fn counter(
    name: &str,
    series: &Value,
    dir: Direction,
    out: &mut Vec<JobEvent>,
) -> Result<(), String> {
    let Some(samples) = series.as_array() else {
        return Err(format!(
            "{name}: expected a series of [t, value] pairs, found {}",
            kind(series)
        ));
    };
    let mut prev: Option<(f64, f64)> = None;
    for (i, s) in samples.iter().enumerate() {
        let pair = s.as_array().filter(|p| p.len() == 2);
        let Some((t, v)) = pair.and_then(|p| Some((p[0].as_f64()?, p[1].as_f64()?))) else {
            return Err(format!(
                "{name}: sample {i} is {s}, not a pair [t, value] of numbers"
            ));
        };
        if !(v.is_finite() && v >= 0.0) {
            return Err(format!(
                "{name}: sample {i}: value {v} is not a byte count ≥ 0"
            ));
        }
        if let Some((t0, v0)) = prev {
            if t < t0 {
                return Err(format!(
                    "{name}: sample {i}: time {t} s is before the previous sample's {t0} s"
                ));
            }
            if v < v0 {
                return Err(format!(
                    "{name}: sample {i}: the total falls from {v0} to {v} bytes (a byte counter \
                     only grows)"
                ));
            }
            let bytes = (v - v0).round();
            if bytes >= 1.0 {
                let ev = event(F, 1, t0, t, bytes.min(u64::MAX as f64) as u64).map_err(|e| {
                    let msg = match e {
                        Error::Parse { message, .. } => message,
                        other => other.to_string(),
                    };
                    format!("{name}: sample {i}: {msg}")
                })?;
                out.push(JobEvent {
                    job: JobId(0),
                    event: ev,
                    dir,
                });
            }
        }
        prev = Some((t, v));
    }
    Ok(())
}

fn keys<'a>(keys: impl Iterator<Item = &'a str>) -> String {
    let k: Vec<String> = keys.take(6).map(|k| format!("{k:?}")).collect();
    if k.is_empty() {
        "an empty map".into()
    } else {
        k.join(", ")
    }
}
