//! deploy/ansible's playbook run by ansible-core (setup.sh's virtualenv)
//! against three machines emulated on this one (crate::emulated), each
//! running Debian's sshd on its underlay address: home-split.toml (cut to
//! IPv4 TCP, crate::cross_host_run) comes up on all three, its probes and
//! assertions cross hosts, each host measures in turn, the results merge
//! into one report, and the playbook's `always:` takes every part down,
//! also after a failed probe or a part killed in the middle of a run. ansible-playbook itself runs
//! on a fourth emulated host of the same underlay, so ssh reaches nothing
//! beyond 198.18.230.0/24.

use crate::common::*;
use crate::emulated::{Host, Hosts};
use crate::parts::Parts;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The inventory's hosts, in the order of the emulated hosts (.1, .2, .3).
const HOSTS: [&str; 3] = ["pc", "router", "server"];

/// Where the playbook puts tunbench and the topology on each host: inside
/// the host's own /run, so nothing lands in this machine's directories.
const DEPLOY_DIR: &str = "/run/tunbench-deploy";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn ansible_playbook() -> PathBuf {
    let p = repo().join("target/ci-tools/venv/bin/ansible-playbook");
    assert!(
        p.is_file(),
        "{} is missing: run `bash scripts/setup.sh --tests`, which installs ansible-core",
        p.display()
    );
    p
}

/// The ssh keys of one test: a host key every sshd serves and the
/// controller's client key, authorised for root.
struct Keys {
    dir: tempfile::TempDir,
}

impl Keys {
    fn new() -> Keys {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for name in ["host_key", "client_key"] {
            let o = Command::new(program("ssh-keygen"))
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "tunbench-test", "-f"])
                .arg(dir.path().join(name))
                .output()
                .expect("running ssh-keygen");
            assert!(o.status.success(), "ssh-keygen: {}", text(&o));
        }
        std::fs::copy(
            dir.path().join("client_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .expect("writing authorized_keys");
        Keys { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }
}

/// An sshd on host `h`'s underlay address, port 22, root by key only; killed
/// on drop.
struct Sshd(KillOnDrop);

impl Sshd {
    fn start(h: &Host, keys: &Keys) -> Sshd {
        let config = keys.dir.path().join(format!("sshd_config-{}", h.name));
        let text = format!(
            "ListenAddress {}:22\nHostKey {}\nAuthorizedKeysFile {}\nPidFile /run/sshd.pid\n\
             PermitRootLogin prohibit-password\nPubkeyAuthentication yes\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             StrictModes no\nSubsystem sftp internal-sftp\nLogLevel ERROR\n",
            h.underlay,
            keys.path("host_key"),
            keys.path("authorized_keys"),
        );
        std::fs::write(&config, text).expect("writing sshd_config");
        // sshd's privilege separation directory, in the host's own /run.
        let o = h.command("mkdir").args(["-p", "/run/sshd"]).output();
        assert!(o.expect("running mkdir").status.success());
        // Root's home on the host is empty, as on a fresh machine: bash
        // reads ~/.bashrc for every command ssh runs, and this machine's own
        // may start anything (a version manager costs 0.2 CPU-s a command).
        let o = h
            .command("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                "mode=700",
                "tunbench-emulated-home",
                "/root",
            ])
            .output();
        assert!(o.expect("running mount").status.success());
        // sshd re-executes itself, so it needs its absolute path.
        program("sshd");
        let child = h
            .command("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .spawn()
            .expect("starting sshd");
        let mut sshd = Sshd(KillOnDrop(child));
        eventually(&format!("sshd listening on {}", h.underlay), || {
            assert!(!sshd.0.ended(), "sshd on {} exited", h.name);
            h.command("test")
                .args(["-e", "/run/sshd.pid"])
                .status()
                .is_ok_and(|s| s.success())
        });
        sshd
    }
}

/// The directory of the controller's ssh master connections (one per host,
/// kept open across the playbook's tasks): each is told to exit on drop, so
/// none outlives the test.
struct SshMasters(PathBuf);

impl SshMasters {
    fn new(dir: &Path) -> SshMasters {
        program("ssh");
        let path = dir.join("cp");
        std::fs::create_dir(&path).expect("a directory for ssh's control sockets");
        SshMasters(path)
    }
}

impl Drop for SshMasters {
    fn drop(&mut self) {
        for socket in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            let _ = Command::new("ssh")
                .args(["-F", "/dev/null", "-O", "exit", "-o"])
                .arg(format!("ControlPath={}", socket.path().display()))
                .arg("master")
                .output();
        }
    }
}

/// The network namespace of host `h`, as /proc/PID/ns/net names it.
fn netns_id(h: &Host) -> String {
    let o = h
        .command("readlink")
        .arg("/proc/self/ns/net")
        .output()
        .expect("running readlink");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Processes of this machine in any of the network namespaces `ids`: pid
/// and command line.
fn pids_in(ids: &[String]) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("reading /proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let ns = std::fs::read_link(e.path().join("ns/net"));
        if ns.is_ok_and(|n| ids.iter().any(|i| n.to_string_lossy() == *i)) {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    found
}

fn processes_in(ids: &[String]) -> Vec<String> {
    pids_in(ids).into_iter().map(|(_, c)| c).collect()
}

/// The playbook against three sshd hosts, `extra` added to its variables,
/// `during` called with the three hosts while it runs; asserts every host
/// and this machine hold nothing of the lab afterwards, and that no process
/// (sshd, ssh session, datapath) outlives the hosts. The merged report, if
/// the playbook wrote one, comes back with its output.
fn run_playbook(
    lab: &str,
    extra: serde_json::Value,
    during: impl FnOnce(&[Host]) + Send,
) -> (Output, Option<String>) {
    let hosts = Hosts::with_mtu(4, 1550);
    let (targets, controller) = hosts.hosts.split_at(3);
    let ids: Vec<String> = hosts.hosts.iter().map(netns_id).collect();
    let keys = Keys::new();
    let sshds: Vec<Sshd> = targets.iter().map(|h| Sshd::start(h, &keys)).collect();
    let parts = Parts {
        hosts: targets,
        lab: lab.to_string(),
    };
    let results = keys.dir.path().join("results");
    let mut vars = serde_json::json!({
        "topology": crate::cross_host_run::short_home_split(keys.dir.path()),
        "tunbench_results": results,
        "tunbench_wait": 20,
        "lab": lab,
        "tunbench_binary": bin(),
        "tunbench_path": format!("{DEPLOY_DIR}/tunbench"),
        "tunbench_dir": DEPLOY_DIR,
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_private_key_file": keys.path("client_key"),
        "ansible_ssh_common_args": "-F /dev/null -o IdentitiesOnly=yes \
            -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
    });
    vars.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let ansible = repo().join("deploy/ansible");
    let masters = SshMasters::new(keys.dir.path());
    let mut playbook = controller[0].command(ansible_playbook().to_str().unwrap());
    playbook
        .arg("-i")
        .arg(ansible.join("home-split.yml"))
        .arg(ansible.join("lab.yml"))
        .args(["-e", &vars.to_string()])
        .current_dir(keys.dir.path())
        .env("LC_ALL", "C.UTF-8")
        .env("ANSIBLE_HOME", keys.dir.path().join("ansible"))
        .env("ANSIBLE_LOCAL_TEMP", keys.dir.path().join("ansible-tmp"))
        .env("ANSIBLE_REMOTE_TMP", "/run/ansible-tmp")
        // One ssh connection per host for all its tasks (a new one per task
        // costs a key exchange and a login each), closed by `masters`.
        .env(
            "ANSIBLE_SSH_ARGS",
            "-o ControlMaster=auto -o ControlPersist=120s",
        )
        .env("ANSIBLE_SSH_CONTROL_PATH_DIR", &masters.0)
        .env("ANSIBLE_PIPELINING", "true")
        .env("ANSIBLE_TIMEOUT", "10")
        .env("ANSIBLE_NOCOLOR", "1");
    let out = std::thread::scope(|s| {
        s.spawn(|| during(targets));
        playbook.output()
    })
    .expect("running ansible-playbook");
    drop(masters);
    let report = std::fs::read_to_string(results.join("report.txt")).ok();
    for (h, name) in targets.iter().zip(HOSTS) {
        assert!(h.namespaces().is_empty(), "{name}: {:?}", h.namespaces());
        assert!(h.vxlan_devices().is_empty(), "{name}: vxlan left");
        let record = h
            .command("test")
            .args(["-e", state_dir(lab).to_str().unwrap()])
            .status()
            .expect("running test");
        assert!(!record.success(), "{name} keeps lab {lab}'s record");
    }
    assert!(namespaces(lab).is_empty(), "{:?}", namespaces(lab));
    assert!(!state_dir(lab).exists());
    drop(parts);
    drop(sshds);
    drop(hosts);
    eventually("no process left in an emulated host", || {
        processes_in(&ids).is_empty()
    });
    (out, report)
}

/// ansible-playbook's recap line for inventory host `name`.
fn recap<'a>(out: &'a str, name: &str) -> &'a str {
    let after = out.split("PLAY RECAP").nth(1).unwrap_or("");
    after
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no recap for {name}: {out}"))
}

#[test]
fn the_playbook_brings_home_split_up_on_three_hosts_probes_across_and_takes_it_down() {
    let lab = lab_name("an");
    // Cells of 1 s: the report's contents are asserted, not its figures.
    let vars = serde_json::json!({ "tunbench_run_args": ["--duration", "1"] });
    let (out, report) = run_playbook(&lab, vars, |_| {});
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    for name in HOSTS {
        assert!(recap(&log, name).contains("failed=0"), "{log}");
    }
    // Every probe of the inventory ran, from its host, and answered.
    for to in [
        "198.18.1.10",
        "2001:2:0:96::2",
        "198.18.11.2",
        "198.18.96.1",
    ] {
        assert!(log.contains(&format!("-> {to})")), "probe to {to}: {log}");
    }
    let downs = log.split("TASK [Take this host's part down]").nth(1);
    let downs = downs.unwrap_or_else(|| panic!("no teardown: {log}"));
    for name in HOSTS {
        assert!(downs.contains(&format!("changed: [{name}]")), "{log}");
    }
    // Each host checked the assertions it holds; pc measured both paths,
    // the router its hop to the server; one report holds them all.
    assert!(
        log.contains("TASK [Check the assertions this host holds]"),
        "{log}"
    );
    let report = report.unwrap_or_else(|| panic!("no merged report: {log}"));
    println!("{report}");
    for want in [
        "merged from 3 parts: host pc measured raw, wireguard",
        "pc -> router: upload",
        "router -> server: upload",
        "raw: pc -> router -> server",
        "wireguard: pc -> router -> server",
        "is round trips only",
    ] {
        assert!(
            report.contains(want),
            "{want:?} not in the report:\n{report}"
        );
    }
}

#[test]
fn a_failing_probe_fails_the_playbook_and_still_takes_every_part_down() {
    let lab = lab_name("af");
    // 198.18.99.99 is nowhere in the lab: pc's ping gets no answer.
    let probes = serde_json::json!({
        "tunbench_probes": [{ "host": "pc", "node": "pc", "to": "198.18.99.99" }],
        "tunbench_probe_tries": 1,
        "tunbench_measure": false,
        // The hosts have them: the first test runs that step.
        "tunbench_runtime_packages": [],
    });
    let (out, report) = run_playbook(&lab, probes, |_| {});
    assert!(report.is_none(), "nothing measured after a failed probe");
    let log = text(&out);
    assert_eq!(out.status.code(), Some(2), "{log}");
    assert!(recap(&log, "pc").contains("failed=1"), "{log}");
    assert!(log.contains("pc on pc -> 198.18.99.99"), "{log}");
    let downs = log.split("TASK [Take this host's part down]").nth(1);
    let downs = downs.unwrap_or_else(|| panic!("no teardown: {log}"));
    for name in HOSTS {
        assert!(downs.contains(&format!("changed: [{name}]")), "{log}");
    }
}

/// Kills every tunbench process of `lab`'s part on `h`: its datapaths and
/// servers in the lab's namespaces, and its underlay server.
fn kill_part(h: &Host, lab: &str) -> usize {
    let mut ids = vec![netns_id(h)];
    for ns in h.namespaces().iter().filter(|n| n.starts_with(lab)) {
        let inode = h
            .command("stat")
            .args(["-L", "-c", "%i", &format!("/run/netns/{ns}")])
            .output()
            .expect("running stat");
        ids.push(format!(
            "net:[{}]",
            String::from_utf8_lossy(&inode.stdout).trim()
        ));
    }
    let ours: Vec<i32> = pids_in(&ids)
        .into_iter()
        .filter(|(_, cmd)| cmd.starts_with(&format!("{DEPLOY_DIR}/tunbench ")))
        .map(|(pid, _)| pid)
        .collect();
    for &pid in &ours {
        // SAFETY: kill(2) on a pid just read; at worst it is gone already.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    ours.len()
}

#[test]
fn killing_one_hosts_part_in_the_middle_of_a_run_leaves_nothing_after_cleanup() {
    let lab = lab_name("ak");
    // Runs long enough to be killed in the middle of; the router's run then
    // gives up on the server's part after 3 s. The hosts have the runtime
    // packages: the first test runs that step.
    let vars = serde_json::json!({
        "tunbench_run_args": ["--duration", "20"],
        "tunbench_wait": 3,
        "tunbench_runtime_packages": [],
    });
    let (out, _) = run_playbook(&lab, vars, |targets| {
        let (pc, server) = (&targets[0], &targets[2]);
        let pc_net = vec![netns_id(pc)];
        wait_until(
            "pc's `tunbench run --host pc` under way",
            Duration::from_secs(180),
            || {
                pids_in(&pc_net)
                    .iter()
                    .any(|(_, c)| c.contains(" run ") && c.contains("--host pc"))
            },
        );
        let killed = kill_part(server, &lab);
        assert!(killed >= 3, "the server's part had {killed} processes");
    });
    let log = text(&out);
    assert_ne!(out.status.code(), Some(0), "{log}");
    // The router's run then waits for the server's part in vain, and says so.
    assert!(log.contains("host server's part does not answer"), "{log}");
    let downs = log.split("TASK [Take this host's part down]").nth(1);
    let downs = downs.unwrap_or_else(|| panic!("no teardown: {log}"));
    for name in HOSTS {
        assert!(downs.contains(&format!("changed: [{name}]")), "{log}");
    }
}
