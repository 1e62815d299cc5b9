//! CSV traces: columns by header name in any order, and every malformed line an error naming its
//! line number and the problem.

use iosets_sim::{read_csv, read_csv_file, CsvProblem, SimError};
use iosets_types::{ClassId, FileId, JobId, Nanos, Op};

fn problem(text: &str) -> (usize, CsvProblem) {
    match read_csv(text.as_bytes()) {
        Err(SimError::Csv { line, problem, .. }) => (line, problem),
        other => panic!("expected a CSV error for {text:?}, got {other:?}"),
    }
}

#[test]
fn all_columns_in_any_order() {
    let text = "# a comment\npriority,op,class,offset,file,size,job,time_s\n\
                0.1,read,7,4096,9,512,3,1.5\n\n,write,,0,9,10,4,0\n";
    let w = read_csv(text.as_bytes()).unwrap();
    assert_eq!(w.len(), 2);
    let a = &w[0];
    assert_eq!(
        (a.job, a.file, a.offset, a.len, a.op),
        (JobId(3), FileId(9), 4096, 512, Op::Read)
    );
    assert_eq!(
        (a.class, a.priority.map(|p| p.get())),
        (Some(ClassId(7)), Some(0.1))
    );
    assert_eq!(a.arrival, Nanos(1_500_000_000));
    assert_eq!((w[1].class, w[1].priority), (None, None));
}

#[test]
fn errors_name_the_line_and_the_problem() {
    let head = "time_s,job,size,op,priority\n";
    let cases: Vec<(String, usize, &str)> = vec![
        (
            format!("{head}0,1,10,read,1\n0,x,10,read,1\n"),
            3,
            "bad number",
        ),
        (
            format!("{head}0,1,10,read,1\n0,1,10,read,1\n-1,1,10,read,1\n"),
            4,
            "negative time",
        ),
        (format!("{head}0,1,10,seek,1\n"), 2, "unknown operation"),
        (format!("{head}0,1,10,read,0\n"), 2, "not a priority"),
        (format!("{head}0,1,10,read,-2\n"), 2, "not a priority"),
        (format!("{head}0,1,10,read\n"), 2, "expected 5 fields"),
        (format!("{head}0,1,1.5,read,1\n"), 2, "bad number"),
        (
            "time_s,job\n0,1\n".to_string(),
            1,
            "missing required column \"size\"",
        ),
        (
            "time_s,job,size,colour\n0,1,2,red\n".to_string(),
            1,
            "unknown column \"colour\"",
        ),
        ("time_s,job,size,job\n".to_string(), 1, "appears twice"),
        ("".to_string(), 1, "empty file"),
        ("\n\n".to_string(), 1, "empty file"),
        ("time_s,job,size\n".to_string(), 1, "no requests"),
    ];
    for (text, line, needle) in cases {
        let (got_line, p) = problem(&text);
        let err = SimError::Csv {
            path: None,
            line: got_line,
            problem: p.clone(),
        }
        .to_string();
        assert_eq!(got_line, line, "{text:?}: {err}");
        assert!(err.contains(&format!("line {line}:")), "{err}");
        assert!(err.contains(needle), "{text:?}: {err} lacks {needle:?}");
    }
}

#[test]
fn typed_problems_can_be_matched() {
    let (_, p) = problem("time_s,job,size\n-0.5,1,1\n");
    assert_eq!(p, CsvProblem::NegativeTime { value: -0.5 });
    let (_, p) = problem("time_s,job,size,op\n0,1,1,fsync\n");
    assert_eq!(
        p,
        CsvProblem::UnknownOp {
            value: "fsync".into()
        }
    );
    let (_, p) = problem("time_s,job,size\n0,1\n");
    assert_eq!(
        p,
        CsvProblem::FieldCount {
            expected: 3,
            found: 2
        }
    );
}

#[test]
fn errors_from_a_file_name_the_file_and_the_line() {
    let path = std::env::temp_dir().join(format!("iosets-sim-csv-{}.csv", std::process::id()));
    std::fs::write(&path, "time_s,job,size\n0,1,10\n0,1,ten\n").unwrap();
    let err = read_csv_file(&path).unwrap_err();
    let _ = std::fs::remove_file(&path);
    assert!(matches!(err, SimError::Csv { line: 3, path: Some(ref p), .. } if *p == path));
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{}, line 3: column size", path.display())),
        "{msg}"
    );
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = read_csv_file(std::path::Path::new("/nonexistent/trace.csv")).unwrap_err();
    assert!(matches!(err, SimError::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/trace.csv"), "{err}");
}
