//! Measuring to an iperf3 server outside any lab (`--to ADDRESS[:PORT]`,
//! `[[measure]] to = { address, port }`): the test builds the outside itself, a
//! namespace named mx... with a veth whose other end it moves into a lab node,
//! and runs a real `iperf3 -s` (or `tunbench server`) there. Also the errors:
//! a bad address, port or family, located in the file or refused on the command
//! line, and nothing answering, said before the matrix starts. Where traffic
//! flows, the outside veth is shaped (`shaped::shape`), so what the cells
//! carry is the shaper's rate, whatever this machine's speed and the outside
//! server's.

use crate::common::pty::AtTerminal;
use crate::common::shaped;
use crate::common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tunbench::vocab::Family;

/// Where the outside server sits, from the lab node's side.
const OUTSIDE_V4: &str = "198.18.200.2";
const OUTSIDE_V6: &str = "2001:2:0:c8::2";
/// The outside veth's rate each way, where traffic flows: low enough that
/// any machine carries it, so the shaper, not the CPU or the outside
/// server's one thread, decides what a cell carries and what a UDP search
/// loses.
const OUTSIDE_RATE: u64 = 40_000_000;

/// A name for this test and process starting with "mx" (labs and namespaces
/// this file makes all do).
fn mx_name(tag: &str) -> String {
    format!("mx{tag}{}", std::process::id() % 100000)
}

/// A namespace outside any lab, joined to `LAB-NODE` by a veth: 198.18.200.2/24
/// and 2001:2:0:c8::2/64 on its end, .1 and ::1 on the lab node's. Made without
/// touching the host's namespace (the pair is made inside it, and one end moved
/// into the lab node). Its servers are stopped and the namespace deleted on
/// drop, which takes the veth (and so the lab node's end) with it.
struct Outside {
    ns: String,
    servers: Vec<Child>,
}

impl Outside {
    fn new(ns: &str) -> Outside {
        let o = Outside {
            ns: ns.to_string(),
            servers: Vec::new(),
        };
        ip(&["netns", "add", ns]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        o
    }

    fn join(&self, lab: &str, node: &str) {
        let (ns, lab_ns) = (self.ns.as_str(), format!("{lab}-{node}"));
        ip(&[
            "-n", ns, "link", "add", "mxout0", "type", "veth", "peer", "name", "mxlab0",
        ]);
        ip(&["-n", ns, "link", "set", "mxlab0", "netns", &lab_ns]);
        for (n, dev, host) in [(ns, "mxout0", "2"), (lab_ns.as_str(), "mxlab0", "1")] {
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &format!("198.18.200.{host}/24"),
                "dev",
                dev,
            ]);
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &format!("2001:2:0:c8::{host}/64"),
                "dev",
                dev,
                "nodad",
            ]);
            ip(&["-n", n, "link", "set", dev, "up"]);
        }
    }

    /// Shapes the veth `join` made to `OUTSIDE_RATE`, each way.
    fn shape(&self, lab: &str, node: &str) {
        shaped::shape(&self.ns, "mxout0", OUTSIDE_RATE);
        shaped::shape(&format!("{lab}-{node}"), "mxlab0", OUTSIDE_RATE);
    }

    /// `program ARGS` in the namespace, once it listens on `port`.
    fn serve(&mut self, program: &str, args: &[&str], port: u16) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns, program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the outside server");
        wait_listening(&mut child, port, &format!("{program} outside the lab"));
        self.servers.push(child);
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn ip(args: &[&str]) {
    let o = Command::new(program("ip"))
        .args(args)
        .output()
        .expect("running ip");
    assert!(o.status.success(), "ip {}: {}", args.join(" "), text(&o));
}

/// `tunbench measure` from h1 to `to`, short.
fn measure(lab: &str, to: &str, extra: &[&str]) -> std::process::Output {
    let mut a = vec![
        "measure",
        lab,
        "--from",
        "h1",
        "--to",
        to,
        "--runs",
        "1",
        "--duration",
        "1",
        "--trial-duration",
        "1",
        "--udp-trials",
        "3",
    ];
    a.extend_from_slice(extra);
    tunbench(&a)
}

/// An IPv4 cell measured over the shaped outside veth (1-s runs): a figure,
/// no more than the shaper lets through, and more than a tenth of it (a
/// cell that reached the server at all, however loaded the machine); a UDP
/// cell searched a rate. (A searched rate can be what a starved sender
/// managed, counted over the test's nominal second: not held to physics.)
fn within_the_outside_rate(c: &serde_json::Value) {
    let rate = OUTSIDE_RATE as f64;
    let goodput = match c["cell"]["protocol"].as_str() {
        Some("tcp") => shaped::tcp_goodput(rate, Family::Ipv4),
        _ => shaped::udp_goodput(rate, 1448.0, Family::Ipv4),
    };
    let most = shaped::most(goodput, rate, 1.0);
    assert!(c["error"].is_null(), "{c}");
    let best = c["best_bps"].as_f64().unwrap();
    eprintln!(
        "{}: best {:.2} Mbit/s, searched {:.2}; the shaper's goodput {:.2}, at most {:.2}",
        c["cell"],
        best / 1e6,
        c["search"]["rate_bps"].as_f64().unwrap_or(0.0) / 1e6,
        goodput / 1e6,
        most / 1e6
    );
    assert!(
        best > goodput / 10.0 && best <= most,
        "{best} bit/s, the shaper's {goodput} at most {most}: {c}"
    );
    if c["cell"]["protocol"] == "udp" {
        assert!(c["search"]["rate_bps"].as_f64().unwrap() > 0.0, "{c}");
    }
}

#[test]
fn measure_reaches_servers_outside_the_lab_tcp_and_udp_both_ways() {
    let lab = mx_name("e");
    let _lab = up_named(&topo("two-hosts.toml"), &lab);
    let mut out = Outside::new(&format!("{lab}o"));
    out.join(&lab, "h1");
    out.shape(&lab, "h1");
    out.serve(program("iperf3"), &["-s", "-p", "5301"], 5301);

    // A real iperf3 server, IPv4: the whole matrix of its family.
    let o = measure(&lab, &format!("{OUTSIDE_V4}:5301"), &["--format", "json"]);
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &j["paths"][0];
    assert_eq!(p["to"], "198.18.200.2:5301", "{p}");
    assert_eq!(p["ipv4"], OUTSIDE_V4);
    assert!(p["ipv6"].is_null(), "the address's family only: {p}");
    let cells = p["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "tcp, udp x sender, receiver");
    for c in cells {
        within_the_outside_rate(c);
    }
    let notes = j["notes"].to_string();
    assert!(
        notes.contains("the server was outside the lab, at 198.18.200.2:5301"),
        "{notes}"
    );

    // IPv6 by [address]:port, UDP (its hello goes to the address too) both
    // directions, as text.
    let o = measure(
        &lab,
        &format!("[{OUTSIDE_V6}]:5301"),
        &["--protocols", "udp"],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("raw: h1 -> [2001:2:0:c8::2]:5301 (2001:2:0:c8::2)"),
        "{t}"
    );
    for cell in ["\nIPv6 UDP Sender  ", "\nIPv6 UDP Receiver  "] {
        assert!(t.contains(cell), "{cell}: {t}");
    }
    assert!(!t.contains("failed"), "{t}");
    assert!(!t.contains("IPv4"), "no other family: {t}");

    // tunbench's own server is an iperf3 server too; no port given: 5201.
    out.serve(bin(), &["server"], 5201);
    let o = measure(
        &lab,
        OUTSIDE_V4,
        &["--protocols", "tcp", "--directions", "receiver"],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("h1 -> 198.18.200.2:5201"), "{t}");
    assert!(t.contains("IPv4 TCP Receiver ("), "{t}");
}

#[test]
fn nothing_answering_outside_is_said_before_the_matrix() {
    let lab = mx_name("n");
    let _lab = up_named(&topo("two-hosts.toml"), &lab);
    let out = Outside::new(&format!("{lab}o"));
    out.join(&lab, "h1");
    // The reason is the kernel's at once, not the probe's timeout.
    for (to, why) in [
        ("198.18.200.2:5209", "Connection refused"),
        ("198.18.201.2", "Network is unreachable"),
    ] {
        let o = measure(&lab, to, &[]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        let addr = if to.contains(':') {
            to.to_string()
        } else {
            format!("{to}:5201")
        };
        assert!(
            t.contains(&format!("nothing answers on {addr} from node h1")) && t.contains(why),
            "{t}"
        );
        assert!(t.contains("iperf3 -s"), "says what to start: {t}");
        assert!(!t.contains("IPv4 TCP"), "no matrix: {t}");
    }
}

/// A topology measuring from h1 of the two-hosts lab to `to` (TOML), with
/// what else `extra` says.
fn outside_file(dir: &Path, name: &str, to: &str, extra: &str) -> std::path::PathBuf {
    let base = std::fs::read_to_string(topo("two-hosts.toml")).unwrap();
    let text = format!(
        "{base}\n[[measure]]\nname = \"ext\"\nfrom = \"h1\"\nto = {to}\nruns = 1\nduration = 1\ntrial_duration = 1\n{extra}"
    );
    let f = dir.join(format!("{name}.toml"));
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn run_with_nothing_answering_outside_fails_fast_and_takes_the_lab_down() {
    let lab = mx_name("r");
    let dir = tempfile::tempdir().unwrap();
    let f = outside_file(
        dir.path(),
        "nobody",
        "{ address = \"198.18.201.2\", port = 5301 }",
        "",
    );
    let _g = LabGuard(lab.clone());
    let o = tunbench(&["run", f.to_str().unwrap(), "--name", &lab]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    // Failed at the probe, for the kernel's reason (no timeout waited out),
    // before any cell.
    assert!(
        t.contains("measuring path ext from h1 to 198.18.201.2:5301: nothing answers on 198.18.201.2:5301 from node h1 (Network is unreachable"),
        "{t}"
    );
    assert!(!t.contains("IPv4 TCP"), "no matrix: {t}");
    assert_gone(&lab);
}

/// `run` with an address target, the outside joined while `run` waits at the
/// scenario's manual step (the moment a person would plug the cable in), TCP
/// and UDP both ways, and the file's published figures for that path, the
/// shaped veth's goodput, compared. Neither cell is more than half above its
/// figure: what the shaper lets through is the most either can carry (a UDP
/// search's rate with its 10 % of loss, 1.2 times the goodput). How far
/// below it a cell falls is how much CPU the outside server and the engine
/// got, which the test does not judge.
#[test]
fn run_measures_to_an_outside_server_and_compares_its_reference() {
    let lab = mx_name("p");
    let dir = tempfile::tempdir().unwrap();
    let rate = OUTSIDE_RATE as f64;
    let f = outside_file(
        dir.path(),
        "outside",
        "{ address = \"198.18.200.2\", port = 5301 }",
        &format!(
            r#"
[scenarios.plugged]
manual = "Connect the outside server to h1"

[reference]
source = "physics"
tolerance = {{ tcp = 50, udp = 50 }}
[reference.figures."plugged/ext"]
"ipv4.tcp.sender" = "{:.0}"
"ipv4.udp.sender" = "{:.0}"
"#,
            shaped::tcp_goodput(rate, Family::Ipv4),
            shaped::udp_goodput(rate, 1448.0, Family::Ipv4),
        ),
    );
    let v = tunbench(&["validate", f.to_str().unwrap()]);
    assert!(v.status.success(), "{}", text(&v));
    assert!(
        text(&v).contains("scenario plugged, manual step: Connect the outside server to h1"),
        "{}",
        text(&v)
    );
    let _g = LabGuard(lab.clone());
    let mut run = AtTerminal::spawn(&["run", f.to_str().unwrap(), "--name", &lab]);
    run.wait_for("press Enter", Duration::from_secs(30));
    let mut out = Outside::new(&format!("{lab}o"));
    out.join(&lab, "h1");
    out.shape(&lab, "h1");
    out.serve(program("iperf3"), &["-s", "-p", "5301"], 5301);
    run.pty.press_enter();
    let (status, stdout, stderr) = run.finish(Duration::from_secs(180));
    assert!(status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("scenario plugged, manual step: Connect the outside server to h1"),
        "{stderr}"
    );
    assert!(
        stdout.contains("plugged/ext: h1 -> 198.18.200.2:5301 (198.18.200.2)"),
        "{stdout}"
    );
    for cell in [
        "\nIPv4 TCP Sender  ",
        "\nIPv4 TCP Receiver  ",
        "\nIPv4 UDP Sender  ",
        "\nIPv4 UDP Receiver  ",
    ] {
        assert!(stdout.contains(cell), "{cell}: {stdout}");
    }
    assert!(!stdout.contains("failed"), "{stdout}");
    assert!(
        stdout.contains("Published (physics) vs measured"),
        "{stdout}"
    );
    assert!(
        stdout.contains("of 2 cells within tolerance") && !stdout.contains("OUT (+"),
        "both figures compared, neither far above the shaper's: {stdout}"
    );
    assert!(
        stdout.contains("path plugged/ext: the server was outside the lab"),
        "{stdout}"
    );
    assert_gone(&lab);
}

#[test]
fn the_command_line_refuses_what_an_address_target_cannot_take() {
    for (args, says) in [
        (vec!["--to", "198.18.200.2:0"], "port 0"),
        (
            vec!["--to", "198.18.200.300"],
            "neither a node name nor an address",
        ),
        (vec!["--to", "127.0.0.1"], "loopback"),
        (
            vec!["--to", "198.18.200.2", "--to-addr", "198.18.0.2"],
            "--to-addr chooses among a node's addresses",
        ),
        (
            vec!["--to", "198.18.200.2", "--families", "ipv4,ipv6"],
            "--families ipv6: 198.18.200.2:5201 is an IPv4 address",
        ),
        (
            vec!["--to", "[2001:2:0:c8::2]:5301", "--families", "ipv4"],
            "is an IPv6 address",
        ),
    ] {
        let mut a = vec!["measure", "mxnolab", "--from", "h1"];
        a.extend(args.iter());
        let o = tunbench(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
}

/// Problems of an address target, each at its place in the file.
#[test]
fn topology_errors_of_an_address_target_are_located() {
    let base = std::fs::read_to_string(topo("two-hosts.toml")).unwrap();
    let check = |measure: &str, at: &str, line: usize, says: &str| {
        let text = format!("{base}\n[[measure]]\nfrom = \"h1\"\n{measure}\n");
        let e = tunbench::topology::parse_str(&text, Path::new("x.toml")).unwrap_err();
        let d =
            e.0.iter()
                .find(|d| d.at == at)
                .unwrap_or_else(|| panic!("{measure}: nothing at {at}: {e}"));
        let first = text
            .lines()
            .position(|l| l == measure.lines().next().unwrap());
        assert_eq!(Some(d.line), first.map(|f| f + 1 + line), "{measure}: {d}");
        assert!(d.message.contains(says), "{measure}: {d}");
    };
    check(
        "to = { address = \"198.18.200\" }",
        "measure[0].to.address",
        0,
        "\"198.18.200\" is not an IPv4 or IPv6 address",
    );
    check(
        "to = { address = \"198.18.200.2/24\" }",
        "measure[0].to.address",
        0,
        "no prefix length",
    );
    check(
        "to = { address = \"0.0.0.0\" }",
        "measure[0].to.address",
        0,
        "unspecified",
    );
    check(
        "to = { address = \"198.18.200.2\", port = 0 }",
        "measure[0].to.port",
        0,
        "port 0; give the server's port, 1 to 65535",
    );
    check(
        "to = { address = \"198.18.200.2\", port = 70000 }",
        "measure[0].to.port",
        0,
        "port 70000",
    );
    check(
        "to = { address = \"198.18.200.2\" }\nfamilies = [\"ipv4\", \"ipv6\"]",
        "measure[0].families[1]",
        1,
        "\"ipv6\" cannot be measured to 198.18.200.2, an IPv4 address",
    );
    check(
        "to = { address = \"2001:2:0:c8::2\" }\nfamilies = [\"ipv4\"]",
        "measure[0].families[0]",
        1,
        "an IPv6 address; list only \"ipv6\"",
    );
    check(
        "to = { address = \"198.18.200.2\" }\nipv4 = \"198.18.200.2\"",
        "measure[0].ipv4",
        1,
        "the target is the address 198.18.200.2 itself",
    );
    check(
        "to = { address = \"198.18.200.2\", prot = 5201 }",
        "measure[0].to.prot",
        0,
        "unknown field `prot`",
    );
    check(
        "[measure.to]\nport = 5201",
        "measure[0].to",
        0,
        "missing field `address`",
    );

    // A valid one: its family is the only one, the port 5201 unless given,
    // and tunbench validate says ok.
    let file = format!(
        "{base}\n[[measure]]\nfrom = \"h1\"\nto = {{ address = \"2001:2:0:c8::2\" }}\n\n[[measure]]\nname = \"p\"\nfrom = \"h2\"\n[measure.to]\naddress = \"198.18.200.2\"\nport = 7000\n"
    );
    let t = tunbench::topology::parse_str(&file, Path::new("x.toml")).unwrap();
    let m = &t.measurements[0];
    assert_eq!(m.to.to_string(), "[2001:2:0:c8::2]:5201");
    assert_eq!(m.families, vec![tunbench::vocab::Family::Ipv6]);
    assert_eq!(t.measurements[1].to.to_string(), "198.18.200.2:7000");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ok.toml");
    std::fs::write(&f, &file).unwrap();
    let o = tunbench(&["validate", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}
