//! GitHub markdown building blocks: escaping and tables. Both the matrix
//! ([`super::table`]) and the published-figures section ([`super::reference`])
//! are written with them, so they live below both.

/// A GitHub markdown table of already escaped cells, the first row its header,
/// every column padded to its widest cell; `left` says which columns are
/// left-aligned (the others are right-aligned).
pub(crate) fn md_table(rows: &[Vec<String>], left: &[bool]) -> String {
    let Some(header) = rows.first() else {
        return String::new();
    };
    let mut w = vec![3; header.len()];
    for row in rows {
        for (i, s) in row.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let line = |row: &[String]| {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if left[i] {
                    format!("{s:<0$}", w[i])
                } else {
                    format!("{s:>0$}", w[i])
                }
            })
            .collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let mut out = line(header);
    let rule: Vec<String> = w
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            if left[i] {
                format!(":{}", "-".repeat(n - 1))
            } else {
                format!("{}:", "-".repeat(n - 1))
            }
        })
        .collect();
    out.push_str(&format!("| {} |\n", rule.join(" | ")));
    for row in &rows[1..] {
        out.push_str(&line(row));
    }
    out
}

/// Markdown-safe text for a table cell or a line: pipes and the characters
/// that would start emphasis or HTML are escaped.
pub(crate) fn md_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '|' | '\\' | '*' | '_' | '`' | '<' | '>' | '[' | ']') {
            o.push('\\');
        }
        o.push(ch);
    }
    o
}
