//! Link rate impairments, measured with tunbench's own engine in namespaces:
//! a shaped direction carries its rate less the Ethernet framing, for TCP and
//! UDP, and each direction keeps its own rate; `tunbench impair` reshapes a
//! running lab. Each figure is the receiver's own rate (see
//! `receiver_rate`), measured until it lies between what the kernel's TBF can
//! let through and `REACHED` of the goodput (`rate_reached`); the rates are low enough that the
//! shaper, not the CPU, is the limit.

use crate::common::*;
use crate::support::*;
use std::path::PathBuf;
use std::process::Command;

const LEFT: &str = "198.18.80.1";
const RIGHT: &str = "198.18.80.2";

/// TCP: 1448 bytes of payload per 1500-byte packet (timestamps on), and the
/// headers on the veth (Ethernet 14 + IP 20 + TCP 32).
const TCP: (f64, f64) = (1448.0, 14.0 + 20.0 + 32.0);
/// UDP: 1400-byte datagrams (Ethernet 14 + IP 20 + UDP 8).
const UDP: (f64, f64) = (1400.0, 14.0 + 20.0 + 8.0);

/// What the shaper counts beyond the veth's frame: preamble, FCS and
/// inter-frame gap, as on a real wire.
const WIRE: f64 = 24.0;

/// Goodput of a link shaped to `rate`: each `payload` bytes cost `headers`
/// more on the veth and `WIRE` more on the wire.
fn goodput(rate: f64, (payload, headers): (f64, f64)) -> f64 {
    rate * payload / (payload + headers + WIRE)
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/impair/rate.toml")
}

/// The floor of a direction shaped to `rate`: `REACHED` of its goodput.
fn least(rate: f64, frame: (f64, f64)) -> f64 {
    REACHED * goodput(rate, frame)
}

/// The ceiling of a direction shaped to `rate`, measured over `secs`: the
/// goodput of what its TBF lets through (`shaped_most`), every frame charged
/// its framing. (tests/datapath/wire.rs holds the steady rate to physics.)
fn most(rate: f64, frame: (f64, f64), secs: f64) -> f64 {
    goodput(shaped_most(rate, tbf_bucket(rate), secs), frame)
}

/// One engine test from `client` to `server` at `to`: the receiver's rate.
fn measure(lab: &str, client: &str, server: &str, to: &str, port: u16, args: &[&str]) -> Figure {
    let j = engine_json(lab, client, server, to, port, args);
    eprintln!("  (the test's time: {:.2} Mbit/s)", received_bps(&j) / 1e6);
    receiver_rate(&j)
}

#[test]
fn a_shaped_link_carries_its_rate_each_way_for_tcp_and_udp() {
    let lab = lab_name("imr");
    let (_g, o) = up(&fixture(), &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    // Each direction to its own rate: the bounds of 20M and 8M do not overlap.
    for (what, client, server, to, rate, port) in [
        ("left->right", "left", "right", RIGHT, 20e6, 5301),
        ("right->left", "right", "left", LEFT, 8e6, 5302),
    ] {
        assert_rate(
            &format!("TCP {what} at {}M", rate / 1e6),
            least(rate, TCP),
            |secs| most(rate, TCP, secs),
            || measure(&lab, client, server, to, port, &["-t", "4"]),
        );
    }
    // UDP both ways at once (each direction has its own shaper), offered
    // above both rates.
    let lab = &lab;
    std::thread::scope(|s| {
        for (what, client, server, to, rate, port) in [
            ("left->right", "left", "right", RIGHT, 20e6, 5303),
            ("right->left", "right", "left", LEFT, 8e6, 5304),
        ] {
            s.spawn(move || {
                let args = ["-t", "3", "-u", "-b", "28M", "-l", "1400"];
                assert_rate(
                    &format!("UDP {what} at {}M", rate / 1e6),
                    least(rate, UDP),
                    |secs| most(rate, UDP, secs),
                    || measure(lab, client, server, to, port, &args),
                );
            });
        }
    });
}

/// `tunbench impair` reshapes a running lab: the named direction takes the new
/// rate, the other keeps its own, `--clear` removes the shaping, and a link end
/// that does not exist is bad input that changes nothing.
#[test]
fn impair_changes_a_running_lab() {
    let lab = lab_name("imc");
    let (_g, o) = up(&fixture(), &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    let qdisc = |node: &str| {
        let o = Command::new("ip")
            .args(["netns", "exec", &format!("{lab}-{node}")])
            .args(["tc", "qdisc", "show", "dev", "eth0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // Down from 20M to 10M: bounds apart from the old ones.
    let o = tunbench(&[
        "impair",
        &lab,
        "left:eth0",
        "--rate",
        "10M",
        "--direction",
        "out",
    ]);
    assert!(o.status.success(), "impair: {}", text(&o));
    assert!(qdisc("left").contains("rate 10Mbit"), "{}", qdisc("left"));
    assert_rate(
        "TCP left->right reshaped to 10M",
        least(10e6, TCP),
        |secs| most(10e6, TCP, secs),
        || measure(&lab, "left", "right", RIGHT, 5310, &["-t", "4"]),
    );
    assert!(qdisc("right").contains("rate 8Mbit"), "{}", qdisc("right"));
    let bad = tunbench(&["impair", &lab, "left:eth7", "--rate", "1M"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(
        text(&bad).contains("no link with an end left:eth7"),
        "{}",
        text(&bad)
    );
    assert!(qdisc("left").contains("rate 10Mbit"), "{}", qdisc("left"));
    // Delay needs the relay this link was built without: refused, nothing changed.
    let bad = tunbench(&["impair", &lab, "left:eth0", "--delay", "5ms"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(
        text(&bad).contains("built without the userspace link path"),
        "{}",
        text(&bad)
    );
    let bad = tunbench(&["impair", &lab, "left:eth0", "--loss", "101"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("outside 0..100"), "{}", text(&bad));
    // Cleared what reaches right: left's shaper is gone, right's stays.
    let o = tunbench(&["impair", &lab, "right:eth0", "--clear", "--direction", "in"]);
    assert!(o.status.success(), "impair --clear: {}", text(&o));
    assert!(!qdisc("left").contains("tbf"), "{}", qdisc("left"));
    assert!(qdisc("right").contains("rate 8Mbit"), "{}", qdisc("right"));
}

/// `shaper = "cake"` as the kernel allows: where it has CAKE, `validate`
/// passes and `up` puts CAKE on each sending end (tests/stock_kernel measures
/// its rate); where it has not, both refuse the file with exit 2, naming the
/// key, the missing `tc-cake` and its kernel option, and nothing is built.
#[test]
fn a_cake_shaper_is_built_or_refused_as_the_kernel_allows() {
    let lab = lab_name("ikck");
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/impair/cake.toml");
    let checked = tunbench(&["validate", file.to_str().unwrap()]);
    let (g, o) = up(&file, &lab);
    if netns::features::cake() {
        assert!(checked.status.success(), "validate: {}", text(&checked));
        assert!(o.status.success(), "up: {}", text(&o));
        let q = Command::new("ip")
            .args(["netns", "exec", &format!("{lab}-left")])
            .args(["tc", "qdisc", "show", "dev", "eth0"])
            .output()
            .unwrap();
        let q = String::from_utf8_lossy(&q.stdout);
        assert!(
            q.contains("qdisc cake 1: root") && q.contains("bandwidth 8Mbit"),
            "{q}"
        );
        return;
    }
    for (what, out) in [("validate", &checked), ("up", &o)] {
        let t = text(out);
        assert_eq!(out.status.code(), Some(2), "{what}: {t}");
        assert!(
            t.contains("links[0].impairments.shaper")
                && t.contains("shaper = \"cake\" needs the kernel's CAKE qdisc")
                && t.contains("`tc-cake`")
                && t.contains("CONFIG_NET_SCH_CAKE"),
            "{what} names the key and what the kernel lacks: {t}"
        );
    }
    drop(g);
    assert_gone(&lab);
}
