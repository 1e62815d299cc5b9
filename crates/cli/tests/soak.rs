//! `iosets soak --quick`: every scenario, scaled down, runs end to end against a real server
//! child on loopback (restarts, many clients, and the resource probes of issue 16), passes, and
//! writes its figures. `fulldisk` needs root for its tmpfs and is skipped, saying why, without.

use crate::common;

use common::{iosets, scratch, stderr, succeeds};

#[test]
fn quick_soak_passes_every_scenario_and_writes_its_figures() {
    let dir = scratch("soak");
    let out = dir.join("out");
    let text = succeeds(&dir, &["soak", "--quick", "--out", out.to_str().unwrap()]);
    let root = rustix::process::geteuid().is_root();
    let expect = if root {
        "9 scenarios: 9 passed, 0 failed, 0 skipped"
    } else {
        "9 scenarios: 8 passed, 0 failed, 1 skipped"
    };
    assert!(text.contains(expect), "{text}");
    let csv = std::fs::read_to_string(out.join("soak.csv")).unwrap();
    for (scenario, figure) in [
        ("kill9", "figure,restarts,3"),
        ("kill9", "figure,lost,0"),
        ("sigterm", "figure,clean_exits,2/2"),
        ("clients", "figure,answered,4000"),
        ("clients", "figure,wrong,0"),
        ("fdlimit", "figure,emfile,0"),
        ("idle", "figure,served,yes (*"),
        ("slow", "figure,served,yes (*"),
        ("noread", "figure,served,yes (*"),
        ("jobs", "figure,errors,0"),
    ] {
        assert!(
            csv.lines()
                .any(|l| l.starts_with(&format!("{scenario},PASS,"))
                    && match figure.strip_suffix('*') {
                        Some(prefix) => l.contains(prefix),
                        None => l.ends_with(figure),
                    }),
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
