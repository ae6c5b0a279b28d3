//! What tunbench needs of strongSwan and what it says back: where Debian
//! installs charon, swanctl and the plugins; the strongswan.conf and
//! swanctl.conf of one IKEv2 end; and the SAs in `swanctl --list-sas --raw`.

pub use crate::vocab::programs::Install;
use std::path::Path;

use crate::topology::tunnel::ikev2::SwanDatapath;

/// charon's plugins, in load order: kernel-libipsec before kernel-netlink
/// (else kernel-netlink tries kernel SAs and fails with "Protocol not
/// supported"), and kernel-netlink stays loaded to install the routes into
/// libipsec's TUN; AES-GCM and ECP groups come from the openssl plugin
/// (libstrongswan-standard-plugins).
const CHARON_PLUGINS: &str = "random nonce openssl aes sha1 sha2 hmac gcm pem pkcs1 pkcs8 x509 pubkey kdf kernel-libipsec kernel-netlink socket-default vici";
/// The same without kernel-libipsec: kernel-netlink installs the SAs and
/// policies into the kernel's xfrm, and the routes.
const CHARON_PLUGINS_KERNEL: &str = "random nonce openssl aes sha1 sha2 hmac gcm pem pkcs1 pkcs8 x509 pubkey kdf kernel-netlink socket-default vici";
const SWANCTL_PLUGINS: &str = "pem pkcs1 pkcs8 x509 pubkey openssl random";

/// strongswan.conf for a charon whose /run is its own directory: the paths
/// are as charon sees them (`/run/...`).
pub fn strongswan_conf(datapath: SwanDatapath) -> String {
    let (load, routes, libipsec) = match datapath {
        SwanDatapath::Libipsec => (
            CHARON_PLUGINS,
            "libipsec steers traffic into its TUN only through routes (table 220).",
            "\n    kernel-libipsec {\n      load = yes\n    }",
        ),
        SwanDatapath::Kernel => (
            CHARON_PLUGINS_KERNEL,
            "xfrm policies act on routed packets: routes (table 220) to the remote selectors.",
            "",
        ),
    };
    format!(
        r#"# Written by tunbench for one IKEv2 end; charon sees this directory as /run.
charon {{
  load_modular = no
  load = {load}
  # {routes}
  install_routes = yes
  install_virtual_ip = no
  # A lab's peer answers at once or not at all: retransmit soon.
  retransmit_timeout = 1.0
  retransmit_base = 1.4
  plugins {{{libipsec}
    vici {{
      socket = unix:///run/charon.vici
    }}
  }}
  filelog {{
    lab {{
      path = /run/charon.log
      time_format = %T
      # Whole lines at once: errors quote the log's end.
      flush_line = yes
      default = 1
      # esp = 2 logs every packet and costs a quarter of the throughput.
      esp = 0
    }}
  }}
  syslog {{
  }}
}}
swanctl {{
  load = {SWANCTL_PLUGINS}
}}
"#
    )
}

/// How an end proves who it is.
#[derive(Debug, Clone)]
pub enum EndAuth {
    /// The pre-shared key's bytes in hex.
    Psk(String),
    /// Its certificate, a file in `x509/` beside swanctl.conf (its key is in
    /// `ecdsa/`, the CA's certificate in `x509ca/`).
    Cert(String),
}

/// One end as swanctl.conf describes it.
#[derive(Debug, Clone)]
pub struct EndConfig {
    /// Connection and child name (the tunnel's).
    pub name: String,
    pub local_id: String,
    pub remote_id: String,
    pub local_addr: std::net::IpAddr,
    pub remote_addr: std::net::IpAddr,
    pub local_ts: Vec<ipnetwork::IpNetwork>,
    pub remote_ts: Vec<ipnetwork::IpNetwork>,
    pub proposals: String,
    pub esp_proposals: String,
    pub auth: EndAuth,
}

fn ts(v: &[ipnetwork::IpNetwork]) -> String {
    v.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

pub fn swanctl_conf(c: &EndConfig) -> String {
    let (local_auth, remote_auth, secrets) = match &c.auth {
        EndAuth::Psk(hex) => (
            "auth = psk".to_string(),
            "psk",
            format!(
                "secrets {{\n  ike-{name} {{\n    id-local = {lid}\n    id-remote = {rid}\n    secret = 0x{hex}\n  }}\n}}\n",
                name = c.name,
                lid = c.local_id,
                rid = c.remote_id
            ),
        ),
        EndAuth::Cert(file) => (
            format!("auth = pubkey\n      certs = {file}"),
            "pubkey",
            String::new(),
        ),
    };
    format!(
        r#"# Written by tunbench for one IKEv2 end.
connections {{
  {name} {{
    version = 2
    local_addrs = {la}
    remote_addrs = {ra}
    proposals = {prop}
    mobike = no
    local {{
      {local_auth}
      id = {lid}
    }}
    remote {{
      auth = {remote_auth}
      id = {rid}
    }}
    children {{
      {name} {{
        mode = tunnel
        local_ts = {lts}
        remote_ts = {rts}
        esp_proposals = {esp}
        # trap policies do not work with libipsec: one end initiates.
        start_action = none
      }}
    }}
  }}
}}
{secrets}"#,
        name = c.name,
        la = c.local_addr,
        ra = c.remote_addr,
        prop = c.proposals,
        lid = c.local_id,
        rid = c.remote_id,
        lts = ts(&c.local_ts),
        rts = ts(&c.remote_ts),
        esp = c.esp_proposals,
    )
}

/// One value of a vici message as `--raw` prints it.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Text(String),
    List(Vec<String>),
    Section(Vec<(String, Value)>),
}

/// Parses the inside of a section up to its `}` (or the end).
fn section(s: &mut std::iter::Peekable<std::str::Chars>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    loop {
        while s.next_if(|c| c.is_whitespace()).is_some() {}
        match s.peek() {
            None => return out,
            Some('}') => {
                s.next();
                return out;
            }
            _ => {}
        }
        let mut key = String::new();
        while let Some(c) = s.next_if(|c| !c.is_whitespace() && *c != '=' && *c != '{' && *c != '}')
        {
            key.push(c);
        }
        while s.next_if(|c| c.is_whitespace()).is_some() {}
        match s.next() {
            Some('{') => out.push((key, Value::Section(section(s)))),
            Some('=') if s.next_if_eq(&'[').is_some() => {
                let mut text = String::new();
                while let Some(c) = s.next_if(|c| *c != ']') {
                    text.push(c);
                }
                s.next();
                out.push((
                    key,
                    Value::List(text.split_whitespace().map(String::from).collect()),
                ));
            }
            Some('=') => {
                let mut text = String::new();
                while let Some(c) = s.next_if(|c| !c.is_whitespace() && *c != '}') {
                    text.push(c);
                }
                out.push((key, Value::Text(text)));
            }
            // Not the shape of a vici message: what was read so far.
            _ => return out,
        }
    }
}

fn get<'a>(items: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    items.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn text(items: &[(String, Value)], key: &str) -> String {
    match get(items, key) {
        Some(Value::Text(t)) => t.clone(),
        _ => String::new(),
    }
}

fn number(items: &[(String, Value)], key: &str) -> u64 {
    text(items, key).parse().unwrap_or(0)
}

fn list(items: &[(String, Value)], key: &str) -> Vec<String> {
    match get(items, key) {
        Some(Value::List(v)) => v.clone(),
        _ => Vec::new(),
    }
}

/// A child SA as `tunbench status` shows it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChildSa {
    pub name: String,
    /// INSTALLED once it carries traffic.
    pub state: String,
    pub mode: String,
    /// ESP in UDP (always, with libipsec).
    pub encap: bool,
    pub spi_in: String,
    pub spi_out: String,
    /// Like "AES_GCM_16-128".
    pub cipher: String,
    pub bytes_in: u64,
    pub packets_in: u64,
    pub bytes_out: u64,
    pub packets_out: u64,
    pub local_ts: Vec<String>,
    pub remote_ts: Vec<String>,
}

/// An IKE SA and its child SAs.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IkeSa {
    pub name: String,
    /// ESTABLISHED once authenticated.
    pub state: String,
    pub local: String,
    pub remote: String,
    pub initiator: bool,
    /// Like "AES_GCM_16-128/PRF_HMAC_SHA2_256/ECP_256".
    pub proposal: String,
    pub established_secs: u64,
    pub children: Vec<ChildSa>,
}

fn cipher(items: &[(String, Value)]) -> String {
    let alg = text(items, "encr-alg");
    match text(items, "encr-keysize") {
        k if k.is_empty() => alg,
        k => format!("{alg}-{k}"),
    }
}

/// The IKE SAs of `swanctl --list-sas --raw` output: one `list-sa event {...}`
/// line per IKE SA. What does not parse is left out.
pub fn parse_list_sas(output: &str) -> Vec<IkeSa> {
    let mut out = Vec::new();
    for line in output.lines() {
        let Some(body) = line.strip_prefix("list-sa event") else {
            continue;
        };
        let mut chars = body.trim_start().chars().peekable();
        if chars.next_if_eq(&'{').is_none() {
            continue;
        }
        for (name, v) in section(&mut chars) {
            let Value::Section(ike) = v else { continue };
            let mut proposal = cipher(&ike);
            for k in ["integ-alg", "prf-alg", "dh-group"] {
                let t = text(&ike, k);
                if !t.is_empty() {
                    proposal = format!("{proposal}/{t}");
                }
            }
            let children = match get(&ike, "child-sas") {
                Some(Value::Section(c)) => c
                    .iter()
                    .filter_map(|(_, v)| match v {
                        Value::Section(c) => Some(ChildSa {
                            name: text(c, "name"),
                            state: text(c, "state"),
                            mode: text(c, "mode"),
                            encap: text(c, "encap") == "yes",
                            spi_in: text(c, "spi-in"),
                            spi_out: text(c, "spi-out"),
                            cipher: cipher(c),
                            bytes_in: number(c, "bytes-in"),
                            packets_in: number(c, "packets-in"),
                            bytes_out: number(c, "bytes-out"),
                            packets_out: number(c, "packets-out"),
                            local_ts: list(c, "local-ts"),
                            remote_ts: list(c, "remote-ts"),
                        }),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            out.push(IkeSa {
                name,
                state: text(&ike, "state"),
                local: format!("{}[{}]", text(&ike, "local-host"), text(&ike, "local-id")),
                remote: format!("{}[{}]", text(&ike, "remote-host"), text(&ike, "remote-id")),
                initiator: text(&ike, "initiator") == "yes",
                proposal,
                established_secs: number(&ike, "established"),
                children,
            });
        }
    }
    out
}

/// The last `lines` lines of a log file, for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    // What charon printed for an established SA between two namespaces.
    const LIST_SAS: &str = "list-sa event {t {uniqueid=1 version=2 state=ESTABLISHED local-host=198.18.86.2 local-port=4500 local-id=b remote-host=198.18.86.1 remote-port=4500 remote-id=a initiator-spi=a3f964a36d001439 responder-spi=2e93bd1aa1599566 nat-remote=yes nat-any=yes encr-alg=AES_GCM_16 encr-keysize=128 prf-alg=PRF_HMAC_SHA2_256 dh-group=ECP_256 established=1 rekey-time=14387 child-sas {t-1 {name=t uniqueid=1 reqid=1 state=INSTALLED mode=TUNNEL protocol=ESP encap=yes spi-in=d4205e5a spi-out=6679dd98 encr-alg=AES_GCM_16 encr-keysize=128 bytes-in=168 packets-in=2 use-in=0 bytes-out=168 packets-out=2 use-out=0 rekey-time=3513 life-time=3959 install-time=1 local-ts=[198.18.87.2/32 2001:2:0:87::2/128] remote-ts=[198.18.87.1/32]}}}}\nlist-sas reply {}\n";

    #[test]
    fn list_sas_raw_parses() {
        let sas = parse_list_sas(LIST_SAS);
        assert_eq!(sas.len(), 1);
        let ike = &sas[0];
        assert_eq!(ike.name, "t");
        assert_eq!(ike.state, "ESTABLISHED");
        assert_eq!(ike.local, "198.18.86.2[b]");
        assert_eq!(ike.remote, "198.18.86.1[a]");
        assert!(!ike.initiator);
        assert_eq!(ike.proposal, "AES_GCM_16-128/PRF_HMAC_SHA2_256/ECP_256");
        assert_eq!(ike.established_secs, 1);
        let c = &ike.children[0];
        assert_eq!(
            c,
            &ChildSa {
                name: "t".into(),
                state: "INSTALLED".into(),
                mode: "TUNNEL".into(),
                encap: true,
                spi_in: "d4205e5a".into(),
                spi_out: "6679dd98".into(),
                cipher: "AES_GCM_16-128".into(),
                bytes_in: 168,
                packets_in: 2,
                bytes_out: 168,
                packets_out: 2,
                local_ts: vec!["198.18.87.2/32".into(), "2001:2:0:87::2/128".into()],
                remote_ts: vec!["198.18.87.1/32".into()],
            }
        );
    }

    #[test]
    fn odd_output_gives_what_parses() {
        assert!(parse_list_sas("list-sas reply {}\n").is_empty());
        assert!(parse_list_sas("").is_empty());
        // Cut short: the IKE SA without its children.
        let cut = &LIST_SAS[..LIST_SAS.find("child-sas").unwrap() + 12];
        let sas = parse_list_sas(cut);
        assert_eq!(sas.len(), 1);
        assert_eq!(sas[0].state, "ESTABLISHED");
        assert!(parse_list_sas("list-sa event {x {a=[1 2").len() == 1);
    }

    /// charon's plugin list, the `load =` line of its section.
    fn charon_load(conf: &str) -> Vec<String> {
        let line = conf
            .lines()
            .find(|l| l.trim().starts_with("load =") && !l.contains("yes"))
            .unwrap();
        line.split('=')
            .nth(1)
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect()
    }

    #[test]
    fn each_datapath_loads_its_kernel_interface() {
        let lib = strongswan_conf(SwanDatapath::Libipsec);
        let kernel = strongswan_conf(SwanDatapath::Kernel);
        let (l, k) = (charon_load(&lib), charon_load(&kernel));
        let at = |v: &[String], p: &str| v.iter().position(|x| x == p);
        // libipsec first, else kernel-netlink claims the SAs.
        assert!(at(&l, "kernel-libipsec").unwrap() < at(&l, "kernel-netlink").unwrap());
        assert!(
            lib.contains("kernel-libipsec {\n      load = yes\n    }"),
            "{lib}"
        );
        // The kernel datapath: kernel-netlink alone, and nothing of libipsec.
        assert_eq!(at(&k, "kernel-libipsec"), None, "{kernel}");
        assert!(at(&k, "kernel-netlink").is_some(), "{kernel}");
        assert!(!kernel.contains("libipsec"), "{kernel}");
        // Otherwise the same plugins, and both install routes.
        let rest: Vec<&String> = l.iter().filter(|p| *p != "kernel-libipsec").collect();
        assert_eq!(rest, k.iter().collect::<Vec<_>>());
        for s in [&lib, &kernel] {
            assert!(s.contains("install_routes = yes"), "{s}");
            assert!(s.contains("socket = unix:///run/charon.vici"), "{s}");
        }
    }

    #[test]
    fn configs_say_what_the_recipe_says() {
        let c = EndConfig {
            name: "vpn".into(),
            local_id: "a".into(),
            remote_id: "b".into(),
            local_addr: "198.18.86.1".parse().unwrap(),
            remote_addr: "198.18.86.2".parse().unwrap(),
            local_ts: vec!["198.18.87.1/32".parse().unwrap()],
            remote_ts: vec![
                "198.18.87.2/32".parse().unwrap(),
                "198.18.88.0/24".parse().unwrap(),
            ],
            proposals: "aes128gcm16-prfsha256-ecp256".into(),
            esp_proposals: "aes128gcm16".into(),
            auth: EndAuth::Psk("00ff".into()),
        };
        let w = swanctl_conf(&c);
        assert!(w.contains("auth = psk\n      id = a"), "{w}");
        let cert = swanctl_conf(&EndConfig {
            auth: EndAuth::Cert("a.pem".into()),
            ..c.clone()
        });
        assert!(
            cert.contains("auth = pubkey\n      certs = a.pem\n      id = a"),
            "{cert}"
        );
        assert!(cert.contains("auth = pubkey\n      id = b"), "{cert}");
        assert!(!cert.contains("secrets"), "{cert}");
        assert!(
            w.contains("remote_ts = 198.18.87.2/32,198.18.88.0/24"),
            "{w}"
        );
        assert!(w.contains("secret = 0x00ff"));
        assert!(w.contains("local_addrs = 198.18.86.1"));
        assert!(!w.contains("trap\n"));
    }
}
