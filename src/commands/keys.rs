//! `tunbench keygen` and `pubkey`: WireGuard keys as text, like `wg genkey` and
//! `wg pubkey`.

use anyhow::{Context, Result};

pub fn keygen() -> Result<i32> {
    let k = crate::vocab::keys::generate().context("reading the kernel's random source")?;
    println!("{}", crate::vocab::keys::to_base64(&k));
    Ok(0)
}

pub fn pubkey() -> Result<i32> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .context("reading a private key on stdin")?;
    let k = crate::vocab::keys::parse(&text).map_err(|e| anyhow::anyhow!("stdin: {e}"))?;
    println!(
        "{}",
        crate::vocab::keys::to_base64(&crate::vocab::keys::public_of(&k))
    );
    Ok(0)
}
