//! bench/soak.sh's verdict rules, on a soak's data written here (its `--report
//! DIR` renders a run's table again without running anything): a steady
//! datapath passes; RSS growth, drops nothing explains and an unanswered
//! control-plane call each fail the kind, and the table says which; the
//! kernel's own link-scope IPv6 on the TUNs (`link_scope`) passes, while
//! `no_route` and `spoofed` fail.

use std::path::Path;
use std::process::Command;

/// One datapath sampled every 10 s for 60 s: `rss` per sample (KiB), the
/// drops JSON of each sample.
struct Soak<'a> {
    rss: [u64; 7],
    drops: [&'a str; 7],
    impair_exit: i32,
}

const NO_DROPS: &str = r#"{"malformed":0,"queue_full":0}"#;

impl Soak<'_> {
    fn steady() -> Self {
        Soak {
            rss: [7416; 7],
            drops: [NO_DROPS; 7],
            impair_exit: 0,
        }
    }

    /// Writes the run's data, renders it, returns (exit code, soak.md).
    fn report(&self) -> (i32, String) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            d,
            "settings",
            "declare -- MINUTES=\"1\"\ndeclare -- WARMUP=\"30\"\ndeclare -- INTERVAL=\"10\"\n\
             declare -- SECS=\"60\"\ndeclare -- MODE=\"sequential\"\ndeclare -- KINDS=\"router\"\n\
             declare -- started=\"t0\"\ndeclare -- ended=\"t1\"\ndeclare -- rev=\"r\"\n\
             declare -- full=\"r\"\nLOAD='0 0 0' MACHINE='test'\n",
        );
        let mut samples = String::from(
            "kind\tt_s\tpid\twhat\talive\trss_kb\tfds\tpackets\tdrops\terrors\tcpu_ticks\n",
        );
        let mut control = String::from("kind\tt_s\tcall\texit\tms\n");
        for i in 0..7 {
            let (t, rss, drops) = (i * 10, self.rss[i], self.drops[i]);
            samples += &format!(
                "router\t{t}\t42\tthe slow path of router r1\t1\t{rss}\t8\t{}\t{drops}\t{{\"tun_write\":0}}\t{t}\n",
                t * 1000
            );
            control += &format!("router\t{t}\tstatus\t0\t7\n");
            let exit = if i == 4 { self.impair_exit } else { 0 };
            control += &format!("router\t{t}\timpair\t{exit}\t9\n");
        }
        write(d, "samples.tsv", &samples);
        write(d, "control.tsv", &control);
        write(
            d,
            "client-router.json",
            r#"{"end":{"sum_received":{"bits_per_second":1.35e9}}}"#,
        );
        write(d, "client-router.rc", "0\n");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/soak.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("--report")
            .arg(d)
            .output()
            .expect("running bash");
        let md = std::fs::read_to_string(d.join("soak.md")).unwrap_or_else(|_| {
            panic!(
                "no soak.md; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), md)
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// The table's row for the router.
fn row(md: &str) -> &str {
    md.lines()
        .find(|l| l.starts_with("| router |"))
        .unwrap_or_else(|| panic!("no router row in:\n{md}"))
}

#[test]
fn a_steady_datapath_passes() {
    let (code, md) = Soak::steady().report();
    let r = row(&md);
    assert_eq!(code, 0, "{md}");
    assert!(r.ends_with("| ok |"), "{r}");
    assert!(r.contains("| 1350 Mbit/s |"), "{r}");
    assert!(r.contains("7.2/7.2/7.2 (+0.0 %)"), "{r}");
    assert!(r.contains("| 14/14, 9 |"), "{r}");
}

#[test]
fn rss_growth_after_the_warm_up_fails() {
    // Growth before the warm-up (t < 30 s) does not count; after it, 10 % does.
    let mut s = Soak::steady();
    s.rss = [5000, 6000, 7000, 7416, 7416, 7800, 8158];
    let (code, md) = s.report();
    assert_eq!(code, 1, "{md}");
    assert!(
        row(&md).contains("FAIL: the slow path of router r1: RSS +10.0 %"),
        "{md}"
    );
}

#[test]
fn drops_only_load_explains_pass_and_others_fail() {
    let full = r#"{"malformed":0,"queue_full":500}"#;
    let mut s = Soak::steady();
    s.drops = [NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, full, full];
    let (code, md) = s.report();
    assert_eq!(code, 0, "queue_full is load: {md}");
    assert!(row(&md).contains("none -> queue_full 500 (+500)"), "{md}");

    let bad = r#"{"malformed":3,"queue_full":0}"#;
    s.drops = [
        NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, bad,
    ];
    let (code, md) = s.report();
    assert_eq!(code, 1, "{md}");
    assert!(
        row(&md).contains("drops after warm-up: malformed 3"),
        "{md}"
    );
}

#[test]
fn link_scope_drops_pass_and_spoofed_or_no_route_drops_fail() {
    let chatter = r#"{"link_scope":2}"#;
    let mut s = Soak::steady();
    s.drops = [
        NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, chatter,
    ];
    let (code, md) = s.report();
    assert_eq!(code, 0, "{md}");
    assert!(
        row(&md).contains("-> link_scope 2 (+2) |") && row(&md).ends_with("| ok |"),
        "{md}"
    );

    for (bad, says) in [
        (r#"{"spoofed":1}"#, "drops after warm-up: spoofed 1"),
        (
            r#"{"no_route":2,"link_scope":2}"#,
            "drops after warm-up: no_route 2",
        ),
    ] {
        s.drops = [
            NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, NO_DROPS, bad,
        ];
        let (code, md) = s.report();
        assert_eq!(code, 1, "{md}");
        assert!(row(&md).contains(says), "{md}");
    }
}

#[test]
fn an_unanswered_control_plane_call_fails() {
    let mut s = Soak::steady();
    s.impair_exit = 124; // timeout(1)'s code
    let (code, md) = s.report();
    assert_eq!(code, 1, "{md}");
    assert!(
        row(&md).contains("13/14") && row(&md).contains("control plane: impair exit 124"),
        "{md}"
    );
}
