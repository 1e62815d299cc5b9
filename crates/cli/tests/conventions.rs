//! What a Unix command is expected to do (issue 17, item 7): die quietly of a closed pipe,
//! complete in the shells, have manual pages, and check a configuration file before use.

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use common::{fails, iosets, scratch, stderr, stdout, succeeds};

/// `iosets policies | head` used to panic ("failed printing to stdout: Broken pipe") with
/// exit 101. The reader here goes away before the command writes a byte, so every write meets
/// a closed pipe whatever the pipe's buffer size.
#[test]
fn a_closed_pipe_ends_printing_commands_quietly() {
    for args in [&["policies"][..], &["completions", "bash"], &["man"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_iosets"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.is_empty(), "{args:?}: wrote to stderr: {err}");
        assert!(
            out.status.success() || out.status.signal() == Some(13),
            "{args:?}: {:?}",
            out.status
        );
    }
}

#[test]
fn completions_are_generated_for_every_shell_and_bash_accepts_its_script() {
    let dir = scratch("completions");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = succeeds(&dir, &["completions", shell]);
        for sub in ["serve", "mount", "ctl", "detect", "config"] {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
    }
    let bash = stdout(&iosets(&dir, &["completions", "bash"]));
    std::fs::write(dir.join("iosets.bash"), bash).unwrap();
    let check = Command::new("bash")
        .arg("-c")
        .arg("source ./iosets.bash && complete -p iosets")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", stderr(&check));
    assert!(stdout(&check).contains("iosets"));
    let bad = iosets(&dir, &["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("tcsh"));
}

#[test]
fn one_manual_page_per_command_and_subcommand() {
    let dir = scratch("man");
    let out = succeeds(&dir, &["man", "--out", "pages"]);
    let mut pages: Vec<String> = std::fs::read_dir(dir.join("pages"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for page in [
        "iosets.1",
        "iosets-serve.1",
        "iosets-mount.1",
        "iosets-ctl-rule-add.1",
        "iosets-config-check.1",
        "iosets-detect.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "no {page} in {pages:?}");
    }
    assert!(out.contains(&format!("wrote {} manual pages", pages.len())));
    let serve = std::fs::read_to_string(dir.join("pages/iosets-serve.1")).unwrap();
    assert!(serve.starts_with(".ie") || serve.contains(".TH iosets-serve 1"));
    assert!(serve.contains("auth\\-file"), "the page lacks --auth-file");
    assert!(
        serve.contains("root\\-squash"),
        "the page lacks --root-squash"
    );
    // The mount's page says who may write what in .iosets/ (issue 33).
    let mount = std::fs::read_to_string(dir.join("pages/iosets-mount.1")).unwrap();
    for needle in [
        "self\\-priority",
        "Who may write a priority",
        "IOSETS_JOB_ID",
        "10^\\-i",
    ] {
        assert!(mount.contains(needle), "iosets-mount.1 lacks {needle:?}");
    }
    let main = stdout(&iosets(&dir, &["man"]));
    assert!(main.contains(".TH iosets 1"));
}

#[test]
fn config_check_passes_a_good_file_and_names_the_first_error_of_a_bad_one() {
    let dir = scratch("config-check");
    std::fs::create_dir(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("good.toml"),
        "root = \"data\"\nlisten = \"127.0.0.1:0\"\npolicy = \"iosets\"\ntoken = \"t\"\n",
    )
    .unwrap();
    let o = iosets(&dir, &["config", "check", "good.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("good.toml: ok\n"), "{}", stdout(&o));
    assert!(stdout(&o).contains("policy = iosets"));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    // Without auth_file: the node's default secret, to be made at the first start.
    assert!(
        stdout(&o).contains("authentication = the node's default secret")
            && stdout(&o).contains("made at the first start"),
        "{}",
        stdout(&o)
    );

    std::fs::write(
        dir.join("open.toml"),
        "root = \"data\"\nlisten = \"0.0.0.0:0\"\ninsecure_loopback = true\n",
    )
    .unwrap();
    let o = iosets(&dir, &["config", "check", "open.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("any local user can act as any user"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("other hosts will be refused"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("no token"), "{}", stderr(&o));
    assert!(stdout(&o).contains("authentication = none (insecure_loopback)"));

    // A default secret others may read: refused, as `iosets serve` would.
    let secret = common::node_secret_path(&dir);
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    fails(
        &dir,
        &["config", "check", "good.toml"],
        &["good.toml", "mode 644", "chmod 600"],
    );
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = iosets(&dir, &["config", "check", "good.toml"]);
    assert!(stdout(&o).contains("(present, private)"), "{}", stdout(&o));
    std::fs::remove_file(&secret).unwrap();

    // The state file beside the configuration (the rules changed at run time) is checked too.
    std::fs::write(
        dir.join("iosets-state.toml"),
        "[[rule]]\nname = \"md\"\nmatch = \"class=meta\"\nrate_ops = 500.0\n",
    )
    .unwrap();
    let o = iosets(&dir, &["config", "check", "good.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("iosets-state.toml: ok, 1 quota rule(s) changed at run time"),
        "{}",
        stdout(&o)
    );
    std::fs::write(
        dir.join("iosets-state.toml"),
        "[[rule]]\nname = \"md\"\nmatch = \"class=meta\"\nrate = 500.0\n",
    )
    .unwrap();
    fails(
        &dir,
        &["config", "check", "good.toml"],
        &["state file", "iosets-state.toml", "line 4", "rate"],
    );
    std::fs::remove_file(dir.join("iosets-state.toml")).unwrap();
    // Shares in the state file are checked and shown; reservations the device cannot meet and
    // a weight of 0 are refused naming the rule or the node.
    std::fs::write(
        dir.join("iosets-state.toml"),
        "[[share]]\nnode = \"account=physics\"\nweight = 3.0\n",
    )
    .unwrap();
    let o = iosets(&dir, &["config", "check", "good.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("shares = account=physics 3"),
        "{}",
        stdout(&o)
    );
    for (text, needles) in [
        (
            "[[share]]\nnode = \"account=physics\"\nweight = 0.0\n",
            &["account=physics", "> 0"][..],
        ),
        (
            "device_ops = 100.0\n[[rule]]\nname = \"vip\"\nmatch = \"job={1 2}\"\nreserve_ops = 60.0\n",
            &["vip", "120 ops/s", "100 ops/s"],
        ),
    ] {
        std::fs::write(dir.join("iosets-state.toml"), text).unwrap();
        fails(&dir, &["config", "check", "good.toml"], needles);
    }
    std::fs::remove_file(dir.join("iosets-state.toml")).unwrap();

    std::fs::write(
        dir.join("bad.toml"),
        "root = \"data\"\npolicy = \"fastest\"\n",
    )
    .unwrap();
    fails(
        &dir,
        &["config", "check", "bad.toml"],
        &["bad.toml", "fastest"],
    );
    std::fs::write(dir.join("typo.toml"), "root = \"data\"\nworkerz = 3\n").unwrap();
    fails(
        &dir,
        &["config", "check", "typo.toml"],
        &["typo.toml", "workerz"],
    );
    std::fs::write(dir.join("root.toml"), "root = \"nowhere\"\n").unwrap();
    fails(
        &dir,
        &["config", "check", "root.toml"],
        &["root.toml", "nowhere"],
    );
    fails(&dir, &["config", "check", "absent.toml"], &["absent.toml"]);
}
