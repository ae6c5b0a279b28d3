//! Certificates for IKEv2 tunnels, issued with strongSwan's `pki` when a lab
//! comes up.

use std::path::Path;

/// A lab's certificates for one tunnel (PEM): the CA's, and per end its
/// private key and certificate.
#[derive(Debug, Clone)]
pub struct Issued {
    pub ca: String,
    /// (node, key, certificate)
    pub ends: Vec<(String, String, String)>,
}

/// Makes a CA and issues an ECDSA P-256 certificate to each node (the node's
/// name as subject CN and subjectAltName, which charon matches to its IKE
/// id) with `pki`, in a directory that is removed again with the CA's key.
pub fn issue_certificates(pki: &Path, tunnel: &str, nodes: &[String]) -> Result<Issued, String> {
    use std::os::unix::fs::DirBuilderExt;
    let work = std::env::temp_dir().join(format!("tunbench-ca-{}-{tunnel}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&work)
        .map_err(|e| format!("creating {}: {e}", work.display()))?;
    let result = issue_in(pki, &work, tunnel, nodes);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn issue_in(pki: &Path, work: &Path, tunnel: &str, nodes: &[String]) -> Result<Issued, String> {
    let run = |args: &[&str]| -> Result<String, String> {
        let o = std::process::Command::new(pki)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("running {}: {e}", pki.display()))?;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            // Without the lines about plugins this build lacks.
            let said: Vec<&str> = err.lines().filter(|l| !l.starts_with("plugin '")).collect();
            return Err(format!("pki {} failed: {}", args[0], said.join("; ")));
        }
        String::from_utf8(o.stdout).map_err(|_| "pki wrote no PEM text".to_string())
    };
    let file = |name: &str, text: &str| -> Result<String, String> {
        let p = work.join(name);
        std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
        Ok(p.to_string_lossy().into_owned())
    };
    let gen_key = || {
        run(&[
            "--gen",
            "--type",
            "ecdsa",
            "--size",
            "256",
            "--outform",
            "pem",
        ])
    };
    let ca_key = file("ca.key", &gen_key()?)?;
    let ca_dn = format!("CN=tunbench {tunnel} CA");
    let ca = run(&[
        "--self",
        "--ca",
        "--lifetime",
        "365",
        "--in",
        &ca_key,
        "--type",
        "ecdsa",
        "--dn",
        &ca_dn,
        "--outform",
        "pem",
    ])?;
    let ca_cert = file("ca.pem", &ca)?;
    let mut ends = Vec::new();
    for n in nodes {
        let key = gen_key()?;
        let key_file = file(&format!("{n}.key"), &key)?;
        let cert = run(&[
            "--issue",
            "--lifetime",
            "365",
            "--cacert",
            &ca_cert,
            "--cakey",
            &ca_key,
            "--type",
            "priv",
            "--in",
            &key_file,
            "--dn",
            &format!("CN={n}"),
            "--san",
            n,
            "--outform",
            "pem",
        ])?;
        ends.push((n.clone(), key, cert));
    }
    Ok(Issued { ca, ends })
}
