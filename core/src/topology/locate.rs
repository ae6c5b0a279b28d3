//! Maps a key path (`links[2].b`) back to a line and column of the source text,
//! and a parse error's offset back to a key path, using toml_edit's
//! span-preserving parse.

use super::{KeyPath, Seg};
use std::ops::Range;
use toml_edit::{Document, Item, Table, Value};

pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

pub struct Locator<'a> {
    text: &'a str,
    doc: Option<Document<String>>,
}

#[derive(Clone, Copy)]
enum At<'d> {
    Table(&'d Table),
    Item(&'d Item),
    Value(&'d Value),
}

impl<'a> Locator<'a> {
    pub fn new(text: &'a str) -> Self {
        Locator {
            text,
            doc: Document::parse(text.to_string()).ok(),
        }
    }

    /// Line and column of the deepest part of `path` that exists in the file.
    pub fn find(&self, path: &KeyPath) -> (usize, usize) {
        let Some(doc) = &self.doc else { return (1, 1) };
        let mut best: Option<Range<usize>> = None;
        let mut cur = At::Table(doc.as_table());
        for seg in &path.0 {
            let Some(next) = step(cur, seg, &mut best) else {
                break;
            };
            cur = next;
        }
        match best {
            Some(r) => line_col(self.text, r.start),
            None => (1, 1),
        }
    }

    /// Key path of the deepest key or value whose text holds `offset`: serde reports
    /// a bad key or value only by its span, so this names it the way other problems
    /// are named.
    pub fn path_at(&self, offset: usize) -> KeyPath {
        let mut best = KeyPath::root();
        if let Some(doc) = &self.doc {
            in_table(doc.as_table(), &KeyPath::root(), offset, &mut best);
        }
        best
    }
}

fn holds(span: Option<Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|s| s.contains(&offset))
}

fn in_table(t: &Table, at: &KeyPath, offset: usize, best: &mut KeyPath) {
    // A table's own span is its `[header]`: where serde puts a missing field.
    if holds(t.span(), offset) {
        *best = at.clone();
    }
    for (k, item) in t.iter() {
        let here = at.key(k);
        if holds(t.key(k).and_then(|k| k.span()), offset) {
            *best = here.clone();
        }
        match item {
            Item::Table(t) => in_table(t, &here, offset, best),
            Item::ArrayOfTables(a) => {
                for (i, t) in a.iter().enumerate() {
                    in_table(t, &here.index(i), offset, best);
                }
            }
            Item::Value(v) => in_value(v, &here, offset, best),
            Item::None => {}
        }
    }
}

fn in_value(v: &Value, at: &KeyPath, offset: usize, best: &mut KeyPath) {
    if !holds(v.span(), offset) {
        return;
    }
    *best = at.clone();
    match v {
        Value::InlineTable(t) => {
            for (k, v) in t.iter() {
                let here = at.key(k);
                if holds(t.key(k).and_then(|k| k.span()), offset) {
                    *best = here.clone();
                }
                in_value(v, &here, offset, best);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                in_value(v, &at.index(i), offset, best);
            }
        }
        _ => {}
    }
}

fn step<'d>(cur: At<'d>, seg: &Seg, best: &mut Option<Range<usize>>) -> Option<At<'d>> {
    let mut note = |s: Option<Range<usize>>| {
        if let Some(s) = s {
            *best = Some(s);
        }
    };
    match (cur, seg) {
        (At::Table(t), Seg::Key(k)) => {
            note(t.key(k).and_then(|k| k.span()));
            let item = t.get(k)?;
            Some(match item {
                Item::Table(t) => At::Table(t),
                Item::Value(v) => {
                    note(v.span());
                    At::Value(v)
                }
                other => At::Item(other),
            })
        }
        (At::Item(Item::ArrayOfTables(a)), Seg::Index(i)) => {
            let t = a.get(*i)?;
            // A [[table]] header has no span of its own; point at its first key.
            note(
                t.iter()
                    .next()
                    .and_then(|(k, _)| t.key(k))
                    .and_then(|k| k.span()),
            );
            Some(At::Table(t))
        }
        (At::Value(Value::InlineTable(t)), Seg::Key(k)) => {
            note(t.key(k).and_then(|k| k.span()));
            let v = t.get(k)?;
            note(v.span());
            Some(At::Value(v))
        }
        (At::Value(Value::Array(a)), Seg::Index(i)) => {
            let v = a.get(*i)?;
            note(v.span());
            Some(At::Value(v))
        }
        _ => None,
    }
}
