//! `iosets detect` end to end on the sample traces shipped with the period crate: per job the
//! period, confidence, Set-10 set and priority and the phases seen, as a table and as JSON; and a
//! one-line error naming the problem for each bad input.

use std::path::Path;
use std::process::Output;

mod common;

use common::{scratch, stderr, stdout};

/// Runs `iosets ARGS` in the package directory.
fn iosets(args: &[&str]) -> Output {
    common::iosets(Path::new("."), args)
}

/// Expects exit code 1 and a one-line error containing every needle.
fn fails(args: &[&str], needles: &[&str]) {
    common::fails(Path::new("."), args, needles)
}

fn sample(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../period/tests/data")
        .join(name)
        .display()
        .to_string()
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
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
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
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
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
    fails(&["detect", &b], &["empty ftio trace"]);
    fails(&["detect", &o], &["cannot tell the format", "--format"]);
    fails(
        &["detect", &c, "--format", "xml"],
        &["unknown trace format \"xml\"", "dxt"],
    );
    fails(
        &["detect", "/nonexistent/trace.csv"],
        &["cannot read /nonexistent/trace.csv"],
    );
    fails(
        &["detect", &sample("requests.csv"), "--job", "7"],
        &["--job 7", "no such job", "jobs: 1, 2"],
    );
}
