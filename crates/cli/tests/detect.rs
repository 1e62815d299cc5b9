//! `iosets detect` end to end on the sample traces shipped with the period crate: per job the
//! period, confidence, Set-10 set and priority and the phases seen, as a table and as JSON; and a
//! one-line error naming the problem for each bad input.

use std::path::Path;
use std::process::Output;

use crate::common;

use common::{scratch, stderr, stdout};

/// Runs `iosets ARGS` in the package directory.
fn iosets(args: &[&str]) -> Output {
    common::iosets(Path::new("."), args)
}

/// Expects exit code 1 and a one-line error containing every needle.
fn fails(args: &[&str], needles: &[&str]) {
    common::fails(Path::new("."), args, needles)
}

/// A sample trace of the period crate's tests, by name, as an argument.
fn sample(name: &str) -> String {
    common::beside_the_crate("../period/tests/data", name)
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = iosets(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn close(v: &serde_json::Value, want: f64) -> bool {
    v.as_f64().is_some_and(|g| (g / want - 1.0).abs() < 0.01)
}

#[test]
fn table_gives_each_job_period_set_priority_and_phases() {
    let o = iosets(&["detect", &sample("requests.csv")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let all: Vec<&str> = out.lines().collect();
    assert_eq!(all.len(), 4, "{out}");
    // The first line says what was read and how.
    assert!(
        all[0].starts_with("# ") && all[0].contains("csv trace, mode all"),
        "{out}"
    );
    let lines = &all[1..];
    assert!(lines[0].split_whitespace().eq([
        "job",
        "period_s",
        "confidence",
        "set",
        "priority",
        "phases",
        "note"
    ]));
    let job1: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(job1[0], "1");
    assert!(
        (job1[1].parse::<f64>().unwrap() - 12.0).abs() < 0.1,
        "{out}"
    );
    assert!(job1[2].parse::<f64>().unwrap() >= 0.5, "{out}");
    assert_eq!(&job1[3..6], ["1", "0.1", "8"], "{out}");
    let job2: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(job2[0], "2");
    assert!(
        (job2[1].parse::<f64>().unwrap() - 150.0).abs() < 1.5,
        "{out}"
    );
    assert_eq!(&job2[3..6], ["2", "0.01", "5"], "{out}");
}

#[test]
fn json_for_each_format() {
    for (file, format, job, period, set, priority, phases) in [
        ("requests.jsonl", None, 2, 150.0, 2, 0.01, 5),
        ("ftio.json", Some("ftio"), 0, 40.0, 2, 0.01, 10),
        ("tmio.jsonl", None, 0, 5.0, 1, 0.1, 8),
        ("dxt.txt", Some("dxt"), 4242, 30.0, 1, 0.1, 6),
    ] {
        let path = sample(file);
        let mut args = vec!["detect", path.as_str(), "--json"];
        if let Some(f) = format {
            args.extend(["--format", f]);
        }
        let v = json(&args);
        let jobs = v["jobs"].as_array().unwrap();
        let j = jobs
            .iter()
            .find(|j| j["job"] == job)
            .unwrap_or_else(|| panic!("{file}: no job {job} in {v}"));
        assert_eq!(j["periodic"], true, "{file}: {j}");
        assert!(close(&j["period_s"], period), "{file}: {j}");
        assert_eq!(j["set"], set, "{file}: {j}");
        assert!(close(&j["priority"], priority), "{file}: {j}");
        assert_eq!(j["phases"], phases, "{file}: {j}");
        assert!(j["confidence"].as_f64().unwrap() >= 0.5, "{file}: {j}");
    }
}

#[test]
fn job_flag_keeps_one_job() {
    let v = json(&["detect", &sample("requests.csv"), "--job", "2", "--json"]);
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["job"], 2);
    assert_eq!(v["format"], "csv");
}

#[test]
fn an_aperiodic_job_gets_its_own_set_and_the_default_priority() {
    let dir = scratch("aperiodic");
    let path = dir.join("one-burst.csv");
    let mut text = String::from("start,end,bytes,job\n");
    for i in 0..20 {
        text.push_str(&format!(
            "{},{},1048576,9\n",
            5.0 + i as f64 * 0.1,
            5.1 + i as f64 * 0.1
        ));
    }
    std::fs::write(&path, text).unwrap();
    let p = path.display().to_string();
    let o = iosets(&["detect", &p]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let row: Vec<&str> = out.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(&row[..5], ["9", "-", "0.00", "own", "0.02"], "{out}");
    assert!(
        out.contains("not periodic: too few I/O phases (1)"),
        "{out}"
    );
    let v = json(&["detect", &p, "--json"]);
    assert_eq!(v["jobs"][0]["periodic"], false);
    assert_eq!(v["jobs"][0]["set"], serde_json::Value::Null);
    assert!(close(&v["jobs"][0]["priority"], 0.02));
}

/// Job 5 writes every 10 s for 15 phases, then every 100 s for 15, then every 20 s for 12 (20%
/// of each period in I/O): three behaviours, changes at the ends of phases 15 and 30.
fn changing_trace(dir: &Path) -> String {
    let path = dir.join("changing.csv");
    let mut text = String::from("start,end,bytes,job\n");
    let mut t = 0.0;
    for (period, phases) in [(10.0, 15), (100.0, 15), (20.0, 12)] {
        for _ in 0..phases {
            t += 0.8 * period;
            text.push_str(&format!("{t:.3},{:.3},1073741824,5\n", t + 0.2 * period));
            t += 0.2 * period;
        }
    }
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn a_job_whose_period_changes_gets_a_line_per_behaviour() {
    let p = changing_trace(&scratch("changing"));
    let o = iosets(&["detect", &p]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    // The job's line is its last behaviour; then one line per behaviour with its time range.
    assert_eq!(&rows[0][..5], ["5", "20.000", "0.92", "1", "0.1"], "{out}");
    assert!(
        out.contains("3 behaviours, changes at 150.000, 1650.000 s"),
        "{out}"
    );
    for (row, (name, period, set, range)) in rows[1..].iter().zip([
        ("5/1", "10.000", "1", "8.000-150.000"),
        ("5/2", "100.000", "2", "150.000-1650.000"),
        ("5/3", "20.000", "1", "1650.000-1890.000"),
    ]) {
        assert_eq!((row[0], row[1], row[3]), (name, period, set), "{out}");
        assert_eq!(row[6], format!("{range}"), "{out}");
    }
    let v = json(&["detect", &p, "--json"]);
    let job = &v["jobs"][0];
    assert_eq!(job["changes_s"], serde_json::json!([150.0, 1650.0]));
    assert_eq!(job["segments"].as_array().unwrap().len(), 3);
    assert!(close(&job["segments"][1]["period_s"], 100.0));
    assert!(close(&job["period_s"], 20.0));
    // Off: one period for the whole trace (none fits it), as before segments existed.
    let off = json(&["detect", &p, "--json", "--segments", "off"]);
    assert_eq!(off["jobs"][0]["segments"].as_array().unwrap().len(), 1);
    assert_eq!(off["jobs"][0]["periodic"], false);
    let o = iosets(&["detect", &p, "--segments", "off"]);
    assert_eq!(stdout(&o).lines().count(), 3);
    // clap's usage error: exit code 2.
    let o = iosets(&["detect", &p, "--segments", "maybe"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("expected on or off, not \"maybe\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_inputs_fail_with_one_line_naming_the_problem() {
    let dir = scratch("bad");
    let corrupt = dir.join("corrupt.csv");
    std::fs::write(&corrupt, "start,end,bytes,job\n1,2,10,1\n1,oops,10,1\n").unwrap();
    let empty = dir.join("empty.csv");
    std::fs::write(&empty, "start,end,bytes,job\n").unwrap();
    let blank = dir.join("blank.json");
    std::fs::write(&blank, "").unwrap();
    let odd = dir.join("notes.txt");
    std::fs::write(&odd, "hello\n").unwrap();
    let (c, e, b, o) = (
        corrupt.display().to_string(),
        empty.display().to_string(),
        blank.display().to_string(),
        odd.display().to_string(),
    );
    fails(
        &["detect", &c],
        &["corrupt.csv", "line 3", "end \"oops\" is not a number"],
    );
    fails(
        &["detect", &e],
        &["empty csv trace", "no request after the header"],
    );
    fails(
        &["detect", &b],
        &["cannot read trace", "blank.json: the file is empty"],
    );
    fails(
        &["detect", &o],
        &[
            "notes.txt: not any of ftio-txt (line 1",
            "csv (line 1",
            "--format",
        ],
    );
    fails(
        &["detect", &c, "--format", "xml"],
        &["unknown trace format \"xml\"", "dxt"],
    );
    fails(
        &["detect", "/nonexistent/trace.csv"],
        &["cannot read trace /nonexistent/trace.csv"],
    );
    fails(
        &["detect", &sample("requests.csv"), "--job", "7"],
        &["--job 7", "no such job", "jobs: 1, 2"],
    );
}

/// Runs `iosets ARGS` and returns its exact stderr, expecting exit code 1.
fn error_line(args: &[&str]) -> String {
    let o = iosets(args);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stdout(&o));
    stderr(&o)
}

/// A fixture of the period crate's tests, by name, as an argument.
fn fixture(name: &str) -> String {
    common::beside_the_crate("../period/tests/fixtures", name)
}

#[test]
fn mode_picks_reads_or_writes_and_defaults_to_writes() {
    let f = fixture("tmio-mixed.jsonl");
    for (mode, want, phases) in [
        (Some("write"), 10.0, 8),
        (None, 10.0, 8),
        (Some("read"), 7.0, 9),
    ] {
        let mut args = vec!["detect", f.as_str(), "--json"];
        if let Some(m) = mode {
            args.extend(["--mode", m]);
        }
        let v = json(&args);
        assert_eq!(v["format"], "tmio-jsonl", "{v}");
        assert_eq!(v["mode"], mode.unwrap_or("write"), "{v}");
        let j = &v["jobs"][0];
        assert!(
            close(&j["period_s"], want) && j["phases"] == phases,
            "{mode:?}: {j}"
        );
    }
    // Mixed, neither period stands out.
    let v = json(&["detect", &f, "--json", "--mode", "all"]);
    assert_eq!(v["jobs"][0]["periodic"], false, "{v}");
    // The table's first line names the format and the mode, and why.
    let o = iosets(&["detect", &f]);
    let out = stdout(&o);
    assert!(
        out.lines()
            .next()
            .unwrap()
            .ends_with("tmio-jsonl trace, mode write (default), 32 of 68 events"),
        "{out}"
    );
}

#[test]
fn each_format_is_recognised_from_its_content() {
    let dir = scratch("sniff");
    for (name, format, period) in [
        ("tmio-mixed.msgpack", "tmio-msgpack", 10.0),
        ("tmio-offline.json", "tmio-json", 20.0),
        ("ftio-app.json", "ftio-json", 4.0),
        ("gekkofs.json", "gekkofs-json", 2.0),
        ("ftio.txt", "ftio-txt", 0.5),
        ("dxt-real.txt", "dxt", 30.0),
    ] {
        // A misleading name: the content decides.
        let renamed = dir.join("trace.csv");
        std::fs::copy(fixture(name), &renamed).unwrap();
        let v = json(&["detect", &renamed.display().to_string(), "--json"]);
        assert_eq!(v["format"], format, "{name}: {v}");
        assert!(close(&v["jobs"][0]["period_s"], period), "{name}: {v}");
    }
}

#[test]
fn unreadable_traces_get_one_exact_line() {
    let dir = scratch("unreadable");
    let missing = dir.join("missing.json");
    let m = missing.display().to_string();
    // Regression: the OS error was printed twice (context and source).
    assert_eq!(
        error_line(&["detect", &m]),
        format!("error: cannot read trace {m}: No such file or directory (os error 2)\n")
    );
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        "{\"write_sync\": {\"bandwidth\": {\"b_rank_avr\": [1, 2], \"t_rank_s\": [0]}}}\n",
    )
    .unwrap();
    let b = bad.display().to_string();
    assert_eq!(
        error_line(&["detect", &b]),
        format!(
            "error: cannot read trace {b}: ftio-json trace, line 1: write_sync.b_rank_avr has 2 \
             values, write_sync.t_rank_s 1 and write_sync.t_rank_e 1\n"
        )
    );
    let binary = dir.join("core.bin");
    std::fs::write(&binary, [0xffu8, 0xfe, 0x00, 0x41]).unwrap();
    let c = binary.display().to_string();
    assert_eq!(
        error_line(&["detect", &c]),
        format!(
            "error: cannot read trace {c}: not text (line 1 is not UTF-8; a Darshan log must first be \
             printed with darshan-dxt-parser) nor tmio-msgpack trace, record 1 (byte 0): expected a TMIO \
             record (an array), found a number\n"
        )
    );
    let f = fixture("tmio-offline.json");
    assert_eq!(
        error_line(&["detect", &f, "--mode", "read"]),
        format!("error: no read event in {f} (tmio-json trace: 0 reads, 48 writes, 0 other); try --mode write\n")
    );
    assert_eq!(
        error_line(&["detect", &f, "--mode", "up"]),
        "error: --mode: unknown mode \"up\": expected read, write, all\n"
    );
}
