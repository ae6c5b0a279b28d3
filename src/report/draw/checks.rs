//! What the tests check of every drawing: well-formed XML, and labels
//! inside the drawing and apart.

use super::TextBox;

/// What is wrong with `labels` in a drawing `width` by `height`: a label
/// outside it, or two straight labels that overlap.
pub(crate) fn misplaced(labels: &[TextBox], width: f64, height: f64) -> Vec<String> {
    let mut faults = Vec::new();
    for l in labels {
        if !(l.x0 >= 0.0 && l.y0 >= 0.0 && l.x1 <= width && l.y1 <= height) {
            faults.push(format!("{l:?} outside {width}x{height}"));
        }
    }
    let straight: Vec<&TextBox> = labels.iter().filter(|l| !l.rotated).collect();
    for (i, a) in straight.iter().enumerate() {
        for b in &straight[i + 1..] {
            if a.overlaps(b) {
                faults.push(format!("{a:?} overlaps {b:?}"));
            }
        }
    }
    faults
}

/// A small well-formedness check: one root, every tag closed in order,
/// attributes quoted, only the five predefined entities (and numeric ones).
pub(crate) fn well_formed(xml: &str) -> Result<Vec<String>, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    let mut rest = xml.strip_prefix("<?xml").ok_or("no XML declaration")?;
    rest = &rest[rest.find("?>").ok_or("unclosed declaration")? + 2..];
    let mut roots = 0;
    while let Some(lt) = rest.find('<') {
        check_text(&rest[..lt])?;
        if stack.is_empty() && !rest[..lt].trim().is_empty() {
            return Err(format!("text outside the root: {:?}", &rest[..lt]));
        }
        rest = &rest[lt + 1..];
        // A '>' inside a quoted attribute value would end the tag early; find
        // the real end by walking the quotes.
        let mut end = None;
        let mut quote = None;
        for (i, ch) in rest.char_indices() {
            match (quote, ch) {
                (None, '"' | '\'') => quote = Some(ch),
                (Some(q), c) if c == q => quote = None,
                (None, '>') => {
                    end = Some(i);
                    break;
                }
                (None, '<') => return Err(format!("'<' inside a tag: {:.40}", rest)),
                _ => {}
            }
        }
        let end = end.ok_or("unclosed tag")?;
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
            if open != name.trim() {
                return Err(format!("<{open}> closed by </{name}>"));
            }
            continue;
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':')
        {
            return Err(format!("bad tag name in <{tag}>"));
        }
        check_attributes(&body[name.len()..])?;
        if stack.is_empty() {
            roots += 1;
        }
        seen.push(name.clone());
        if !self_closing {
            stack.push(name);
        }
    }
    check_text(rest)?;
    if !rest.trim().is_empty() {
        return Err("text after the root".into());
    }
    match (stack.last(), roots) {
        (Some(open), _) => Err(format!("<{open}> never closed")),
        (None, 1) => Ok(seen),
        (None, n) => Err(format!("{n} root elements")),
    }
}

fn check_text(t: &str) -> Result<(), String> {
    if t.contains('>') {
        return Err(format!("raw '>' in text {t:?}"));
    }
    let mut rest = t;
    while let Some(amp) = rest.find('&') {
        rest = &rest[amp + 1..];
        let semi = rest.find(';').ok_or(format!("bare '&' in {t:?}"))?;
        let entity = &rest[..semi];
        let numeric = entity.strip_prefix('#').is_some_and(|n| {
            n.parse::<u32>().is_ok()
                || n.strip_prefix('x')
                    .is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
        });
        if !numeric && !["amp", "lt", "gt", "quot", "apos"].contains(&entity) {
            return Err(format!("unknown entity &{entity}; in {t:?}"));
        }
    }
    Ok(())
}

fn check_attributes(mut a: &str) -> Result<(), String> {
    let mut names = Vec::new();
    loop {
        a = a.trim_start();
        if a.is_empty() {
            return Ok(());
        }
        let eq = a
            .find('=')
            .ok_or(format!("attribute without value: {a:?}"))?;
        let name = a[..eq].trim();
        if names.contains(&name) {
            return Err(format!("attribute {name} twice"));
        }
        names.push(name);
        let v = &a[eq + 1..];
        let q = v
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'')
            .ok_or(format!("unquoted {name}"))?;
        let close = v[1..].find(q).ok_or(format!("unterminated {name}"))?;
        let value = &v[1..1 + close];
        if value.contains('<') {
            return Err(format!("'<' in attribute {name}"));
        }
        check_text(&value.replace('>', ""))?;
        a = &v[close + 2..];
    }
}

#[test]
fn the_checker_catches_what_it_should() {
    let ok = "<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><rect/></g><text>a &amp; b</text></svg>\n";
    assert!(well_formed(ok).is_ok());
    for bad in [
        "<?xml?><svg><g></svg>",
        "<?xml?><svg></g></svg>",
        "<?xml?><svg><text>a & b</text></svg>",
        "<?xml?><svg a=1></svg>",
        "<?xml?><svg a=\"1\" a=\"2\"></svg>",
        "<?xml?><svg></svg><svg></svg>",
        "<?xml?><svg><text>&nbsp;</text></svg>",
        "<?xml?><svg>",
    ] {
        assert!(well_formed(bad).is_err(), "{bad}");
    }
}
