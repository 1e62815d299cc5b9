//! `iosets soak --quick`: the scenarios expected to pass today run end to end against a real
//! server child on loopback, pass, and write their figures.

mod common;

use common::{iosets, scratch, stderr, stdout};

#[test]
fn quick_soak_of_restarts_and_clients_passes_and_writes_its_figures() {
    let dir = scratch("soak");
    let out = dir.join("out");
    let o = iosets(
        &dir,
        &[
            "soak",
            "--quick",
            "--only",
            "kill9,sigterm,clients",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let text = stdout(&o);
    assert!(o.status.success(), "{text}\n{}", stderr(&o));
    assert!(
        text.contains("3 scenarios: 3 passed, 0 failed, 0 skipped"),
        "{text}"
    );
    let csv = std::fs::read_to_string(out.join("soak.csv")).unwrap();
    for (scenario, figure) in [
        ("kill9", "figure,restarts,3"),
        ("kill9", "figure,lost,0"),
        ("sigterm", "figure,clean_exits,2/2"),
        ("clients", "figure,answered,4000"),
        ("clients", "figure,wrong,0"),
    ] {
        assert!(
            csv.lines()
                .any(|l| l.starts_with(&format!("{scenario},PASS,")) && l.ends_with(figure)),
            "no {scenario} line ending in {figure}:\n{csv}"
        );
    }
    assert!(std::fs::read_to_string(out.join("summary.txt"))
        .unwrap()
        .contains("kill9"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_scenarios_are_refused_with_the_list() {
    let dir = scratch("soak-unknown");
    let o = iosets(&dir, &["soak", "--only", "kill9,nosuch"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("no such scenario") && err.contains("fulldisk"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
