//! net.* sysctls, written through /proc/sys from a thread inside the namespace
//! (/proc/sys/net shows the namespace of the thread that opens it).

use std::io;
use std::path::PathBuf;

/// `net.ipv4.conf.eth0.rp_filter` -> /proc/sys/net/ipv4/conf/eth0/rp_filter.
/// A '/' in a key stands for a '.' in a name (VLAN devices), as sysctl(8) has it.
pub fn proc_path(key: &str) -> PathBuf {
    let p: String = key
        .chars()
        .map(|c| match c {
            '.' => '/',
            '/' => '.',
            c => c,
        })
        .collect();
    PathBuf::from("/proc/sys").join(p)
}

pub fn write(key: &str, value: &str) -> io::Result<()> {
    std::fs::write(proc_path(key), value).map_err(|e| explain(e, value))
}

/// Writes several sysctls of the calling thread's namespace, in order; the
/// first failure stops and says which (its index). Opens /proc/sys/net once
/// and each `net.*` key relative to it: every namespace has a dentry of its
/// own for /proc/sys/net, all of them in one hash chain, so a full path lookup
/// costs as many comparisons as there are namespaces. Per key that made `up`
/// of 1,000 nodes grow faster than linearly; per namespace it is one lookup.
pub fn write_all(pairs: &[(String, String)]) -> Result<(), (usize, io::Error)> {
    let mut net_dir: Option<std::fs::File> = None;
    for (i, (key, value)) in pairs.iter().enumerate() {
        let Some(rest) = key.strip_prefix("net.") else {
            write(key, value).map_err(|e| (i, e))?;
            continue;
        };
        if net_dir.is_none() {
            net_dir = Some(std::fs::File::open("/proc/sys/net").map_err(|e| (i, e))?);
        }
        let dir = net_dir.as_ref().expect("opened above");
        let relative = proc_path(rest);
        let relative = relative
            .strip_prefix("/proc/sys")
            .expect("proc_path starts at /proc/sys");
        write_at(dir, relative, value).map_err(|e| (i, e))?;
    }
    Ok(())
}

fn write_at(dir: &std::fs::File, relative: &std::path::Path, value: &str) -> io::Result<()> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    let fd = openat(
        dir,
        relative,
        OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| explain(io::Error::from(e), value))?;
    let mut f = std::fs::File::from(fd);
    std::io::Write::write_all(&mut f, value.as_bytes()).map_err(|e| explain(e, value))
}

fn explain(e: io::Error, value: &str) -> io::Error {
    let what = match e.kind() {
        io::ErrorKind::NotFound => "no such sysctl in this kernel or namespace".to_string(),
        io::ErrorKind::InvalidInput => format!("the kernel rejects the value \"{value}\""),
        _ => e.to_string(),
    };
    io::Error::new(e.kind(), what)
}

pub fn read(key: &str) -> io::Result<String> {
    Ok(std::fs::read_to_string(proc_path(key))?.trim().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_map_to_proc_paths() {
        assert_eq!(
            super::proc_path("net.ipv4.ip_forward").to_str(),
            Some("/proc/sys/net/ipv4/ip_forward")
        );
        // A VLAN device eth0.100 is written eth0/100 in a key.
        assert_eq!(
            super::proc_path("net.ipv6.conf.eth0/100.accept_ra").to_str(),
            Some("/proc/sys/net/ipv6/conf/eth0.100/accept_ra")
        );
    }

    /// In a namespace of a thread's own (gone with the thread): values land,
    /// and the first bad key stops the batch and is named by its index.
    #[test]
    fn write_all_lands_each_value_and_names_the_first_failure() {
        let r = std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare (root)");
            let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
            super::write_all(&[
                kv("net.ipv4.ip_forward", "1"),
                kv("net.ipv6.conf.default.accept_dad", "0"),
            ])
            .map_err(|(i, e)| format!("{i}: {e}"))?;
            let read = (
                super::read("net.ipv4.ip_forward").unwrap(),
                super::read("net.ipv6.conf.default.accept_dad").unwrap(),
            );
            let bad = super::write_all(&[
                kv("net.ipv4.ip_forward", "0"),
                kv("net.ipv4.no_such_key", "1"),
                kv("net.ipv4.ip_forward", "1"),
            ])
            .unwrap_err();
            let after = super::read("net.ipv4.ip_forward").unwrap();
            Ok::<_, String>((read, bad.0, bad.1.to_string(), after))
        })
        .join()
        .unwrap()
        .unwrap();
        assert_eq!(r.0, ("1".to_string(), "0".to_string()));
        assert_eq!(r.1, 1);
        assert!(r.2.contains("no such sysctl"), "{}", r.2);
        assert_eq!(r.3, "0", "the batch stopped at the bad key");
    }
}
