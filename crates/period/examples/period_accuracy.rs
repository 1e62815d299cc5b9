//! Accuracy bench of the period detector (issue 4): periods 10, 64, 100, 384, 640 and 1000 s, I/O
//! 20% of the period, jitter 0/10/30/50% on phase lengths and volumes, with and without small
//! background I/O, 20 and 5 iterations.
//!
//! For each case it writes the trace as FTIO bandwidth steps (`<out>/traces/<case>.json`), reads
//! it back (so that iosets and FTIO see exactly the same data), detects its period, times the
//! analysis (best of 5 runs after a first, untimed one), and writes one JSON line per case to `<out>/iosets.jsonl`.
//!
//! Run by `bench/period_accuracy.sh`; by hand:
//! `cargo run --release -p iosets-period --example period_accuracy -- <out>`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use iosets_period::synth::PeriodicSpec;
use iosets_period::trace::{parse, to_ftio_json, Format};
use iosets_period::{detect, Event};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "period-bench".into()),
    );
    let traces = out.join("traces");
    std::fs::create_dir_all(&traces)?;
    let mut results = std::fs::File::create(out.join("iosets.jsonl"))?;
    let mut first = true;
    for iterations in [20usize, 5] {
        for background in [false, true] {
            for jitter in [0.0, 0.1, 0.3, 0.5] {
                for period in [10.0, 64.0, 100.0, 384.0, 640.0, 1000.0] {
                    let spec = PeriodicSpec {
                        jitter,
                        background,
                        seed: 42,
                        ..PeriodicSpec::new(period, iterations)
                    };
                    let trace = spec.generate();
                    let truth = trace.true_period_s().ok_or("no truth")?;
                    let name = format!(
                        "p{period}_it{iterations}_j{}_{}",
                        (jitter * 100.0) as u32,
                        if background { "bg" } else { "clean" }
                    );
                    let path = traces.join(format!("{name}.json"));
                    let text = to_ftio_json(&trace.events);
                    std::fs::write(&path, &text)?;
                    let events: Vec<Event> = parse(&text, Format::Ftio)?
                        .into_iter()
                        .map(|e| e.event)
                        .collect();
                    let mut best = f64::INFINITY;
                    let t = Instant::now();
                    let mut det = detect(&events);
                    if first {
                        // FFT plans are built once per process, by this call.
                        eprintln!(
                            "first analysis of the process (plans built): {:.3} ms",
                            t.elapsed().as_secs_f64() * 1e3
                        );
                        first = false;
                    }
                    for _ in 0..5 {
                        let t = Instant::now();
                        det = detect(&events);
                        best = best.min(t.elapsed().as_secs_f64());
                    }
                    let line = serde_json::json!({
                        "case": name,
                        "trace": path.display().to_string(),
                        "period": period,
                        "iterations": iterations,
                        "jitter": jitter,
                        "background": background,
                        "truth_s": truth,
                        "periodic": det.is_periodic(),
                        "estimate_s": det.best().map(|e| e.period.as_secs_f64()),
                        "confidence": det.confidence(),
                        "phases": det.phases(),
                        "time_s": best,
                    });
                    writeln!(results, "{line}")?;
                }
            }
        }
    }
    println!("wrote {}", out.join("iosets.jsonl").display());
    Ok(())
}
