//! Change-point bench of `iosets detect` (issue 32): jobs whose period changes once or twice
//! (×10, ÷10, ×2, ÷2 and two changes), 15 iterations per behaviour, I/O 20% of the period, jitter
//! 0/10/30% on phase lengths and volumes, with and without small background I/O, two seeds.
//!
//! For each case it writes the trace as FTIO bandwidth steps (`<out>/traces/<case>.json`), reads
//! it back (so that iosets and FTIO see exactly the same data), splits it
//! ([`iosets_period::segment::segment`]), times the analysis (best of 5 after a first, untimed
//! one) and writes one JSON line per case to `<out>/iosets.jsonl`: the truth (change times, each
//! behaviour's `w_iter`, its phase starts) and what was found (each segment's range, period,
//! confidence, phases).
//!
//! Then the speed cases, `<out>/speed.jsonl`: 10,000-phase traces (one behaviour, and 5,000
//! phases at 10 s then 5,000 at 100 s; 8 requests per phase, 10% jitter), written as FTIO JSON
//! too and read back, segmented and detected whole as before (`detect`), best of 5.
//!
//! `SCALE=s` multiplies every period by `s` (default 1).
//!
//! Run by `bench/period_changes.sh`; by hand:
//! `cargo run --release -p iosets-period --example period_changes -- <out>`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use iosets_period::segment::segment;
use iosets_period::synth::{changing, PeriodicSpec};
use iosets_period::trace::{parse, to_ftio_json, Format};
use iosets_period::{detect, Event};

/// The behaviours of each class, by period (seconds).
const CLASSES: [(&str, &[f64]); 7] = [
    ("x10", &[10.0, 100.0]),
    ("div10", &[100.0, 10.0]),
    ("x2", &[64.0, 128.0]),
    ("div2", &[640.0, 320.0]),
    ("x10_div10", &[10.0, 100.0, 10.0]),
    ("div10_x2", &[100.0, 10.0, 20.0]),
    ("x10_x2", &[40.0, 400.0, 800.0]),
];

/// Best of five timed runs of `f` (after one untimed run), seconds, and its last result.
fn timed<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let mut out = f();
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        out = f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, out)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "period-changes".into()),
    );
    // Every period times SCALE (default 1): FTIO's change-point windows restart 0.5-2 s before
    // a detection, a time scale of seconds.
    let scale: f64 = match std::env::var("SCALE") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|s: &f64| *s > 0.0 && s.is_finite())
            .ok_or_else(|| format!("SCALE={v}: expected a positive number"))?,
        Err(_) => 1.0,
    };
    let traces = out.join("traces");
    std::fs::create_dir_all(&traces)?;
    let mut results = std::fs::File::create(out.join("iosets.jsonl"))?;
    for (class, periods) in CLASSES {
        for jitter in [0.0, 0.1, 0.3] {
            for background in [false, true] {
                for seed in [1u64, 2] {
                    let specs: Vec<PeriodicSpec> = periods
                        .iter()
                        .map(|&p| PeriodicSpec {
                            jitter,
                            background,
                            ..PeriodicSpec::new(p * scale, 15)
                        })
                        .collect();
                    let truth = changing(&specs, seed);
                    let name = format!(
                        "{class}_j{}_{}_s{seed}",
                        (jitter * 100.0) as u32,
                        if background { "bg" } else { "clean" }
                    );
                    let path = traces.join(format!("{name}.json"));
                    let text = to_ftio_json(&truth.trace.events);
                    std::fs::write(&path, &text)?;
                    let events: Vec<Event> = parse(&text, Format::Ftio)?
                        .into_iter()
                        .map(|e| e.event)
                        .collect();
                    let (time_s, found) = timed(|| segment(&events));
                    let segments: Vec<serde_json::Value> = found
                        .segments
                        .iter()
                        .map(|s| {
                            serde_json::json!({
                                "start_s": s.start.as_secs_f64(),
                                "end_s": s.end.as_secs_f64(),
                                "period_s": s.detection.period().map(|p| p.as_secs_f64()),
                                "confidence": s.detection.confidence(),
                                "phases": s.detection.phases(),
                            })
                        })
                        .collect();
                    let true_periods: Vec<f64> = (0..periods.len())
                        .map(|k| truth.true_period_s(k).unwrap_or(f64::NAN))
                        .collect();
                    let line = serde_json::json!({
                        "case": name,
                        "class": class,
                        "trace": path.display().to_string(),
                        "periods": periods.iter().map(|p| p * scale).collect::<Vec<_>>(),
                        "jitter": jitter,
                        "background": background,
                        "seed": seed,
                        "true_changes_s": truth.changes.iter().map(|t| t.as_secs_f64()).collect::<Vec<_>>(),
                        "true_periods_s": true_periods,
                        "phase_starts_s": truth.trace.phase_starts.iter().map(|t| t.as_secs_f64()).collect::<Vec<_>>(),
                        "segments": segments,
                        "time_s": time_s,
                    });
                    writeln!(results, "{line}")?;
                }
            }
        }
    }
    println!("wrote {}", out.join("iosets.jsonl").display());

    let mut speed = std::fs::File::create(out.join("speed.jsonl"))?;
    let one = |p: f64, n: usize| PeriodicSpec {
        jitter: 0.1,
        requests_per_phase: 8,
        ..PeriodicSpec::new(p, n)
    };
    for (name, specs) in [
        ("10000 phases, one behaviour", vec![one(10.0, 10_000)]),
        (
            "10000 phases, 10 s then 100 s",
            vec![one(10.0, 5_000), one(100.0, 5_000)],
        ),
    ] {
        let path = traces.join(format!("speed-{}.json", specs.len()));
        let text = to_ftio_json(&changing(&specs, 7).trace.events);
        std::fs::write(&path, &text)?;
        let events: Vec<Event> = parse(&text, Format::Ftio)?
            .into_iter()
            .map(|e| e.event)
            .collect();
        let (seg_s, found) = timed(|| segment(&events));
        let (whole_s, whole) = timed(|| detect(&events));
        let line = serde_json::json!({
            "case": name,
            "trace": path.display().to_string(),
            "events": events.len(),
            "segment_s": seg_s,
            "segments": found.segments.len(),
            "last_period_s": found.last().detection.period().map(|p| p.as_secs_f64()),
            "detect_whole_s": whole_s,
            "detect_whole_period_s": whole.period().map(|p| p.as_secs_f64()),
        });
        println!("{line}");
        writeln!(speed, "{line}")?;
    }
    Ok(())
}
