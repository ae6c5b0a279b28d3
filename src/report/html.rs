//! `--format html`: one self-contained page a person reads in a browser,
//! with nothing fetched from anywhere (CSS, charts and the one small script
//! are inline; no fonts, images or external scripts):
//!
//! - the heading (what was measured, where, when) and a contents list;
//! - where each path goes;
//! - every view ([`super::views`]) under its own heading with its question,
//!   its charts ([`super::chart`]), its table, its legend, footnotes for
//!   failed cells and its notes; the published-figure comparison
//!   ([`super::reference`]) is the first view when the topology has one;
//! - the run's notes;
//! - the topology's graph ([`super::graph`]) drawn and in Graphviz dot, or
//!   why it is not there: the report layer reads no topology file itself,
//!   the command that renders the page hands the graph in.
//!
//! Everything that comes from the results is escaped. The inline script
//! checks that every view's charts are in the page: it sets
//! `data-charts="ok"` on `<body>`, or logs an error naming what is missing
//! (the browser test reads both).

use super::chart::{self, Chart};
use super::draw::esc;
use super::table::{footnote, heading, path_line};
use super::views::{Column, View, views_with_baseline};
use crate::measure::results::Results;
use std::fmt::Write;

/// The topology's graph as `tunbench graph` draws it (SVG, embedded as it
/// is: tunbench wrote and escaped it) and prints it in Graphviz dot.
#[derive(Debug, Clone, Copy)]
pub struct Graph<'a> {
    pub svg: &'a str,
    pub dot: &'a str,
}

/// The topology's graph, or why the page has none.
pub type TopologyGraph<'a> = Result<Graph<'a>, String>;

const CSS: &str = "
body { font-family: Helvetica, Arial, sans-serif; color: #222; background: #fafafa;
  margin: 0 auto; padding: 0 24px 48px; max-width: 1240px; line-height: 1.4; }
h1 { font-size: 26px; margin: 28px 0 4px; }
h2 { font-size: 20px; margin: 36px 0 6px; border-bottom: 2px solid #ddd; padding-bottom: 4px; }
p.meta { color: #555; margin: 0 0 12px; }
p.question { font-size: 16px; font-style: italic; margin: 4px 0 12px; }
nav ol { columns: 2; margin: 4px 0; }
section.view, section.plain { background: #fff; border: 1px solid #e3e3e3; border-radius: 6px;
  padding: 4px 20px 16px; margin: 20px 0; }
section h2 { margin-top: 16px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0 16px; }
.charts svg { max-width: 100%; height: auto; border: 1px solid #eee; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { padding: 3px 10px; white-space: nowrap; }
th { text-align: left; border-bottom: 2px solid #999; background: #f3f3f3; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.group td { border-top: 1px solid #ccc; }
td.out { color: #b00020; font-weight: bold; }
td.failed { color: #b00020; }
.legend { color: #555; font-size: 13px; }
.legend p { margin: 2px 0; }
ol.footnotes, ul.notes { font-size: 13px; }
div.graph svg { max-width: 100%; height: auto; border: 1px solid #eee; }
summary { cursor: pointer; color: #555; margin: 8px 0; }
pre { background: #f5f5f5; border: 1px solid #e3e3e3; padding: 12px; overflow-x: auto; font-size: 12px; }
p.missing { color: #8a5a00; }
footer { color: #777; font-size: 12px; margin-top: 32px; }
";

/// The script that says whether every view's charts are in the page.
const CHECK: &str = "(function () {
  var missing = [];
  document.querySelectorAll('section.view').forEach(function (s) {
    var want = Number(s.getAttribute('data-charts'));
    var have = s.querySelectorAll('svg.chart').length;
    if (have !== want) { missing.push(s.id + ': ' + have + ' of ' + want); }
  });
  document.body.setAttribute('data-charts', missing.length ? 'missing' : 'ok');
  if (missing.length) { console.error('tunbench: charts missing: ' + missing.join('; ')); }
})();";

/// The page for `r`: the views as [`views_with_baseline`] gives them, each
/// with its charts.
pub fn page(r: &Results, baseline: Option<&str>, graph: TopologyGraph) -> String {
    let views: Vec<(View, Vec<Chart>)> = views_with_baseline(r, baseline)
        .into_iter()
        .map(|v| {
            let c = chart::charts(&v);
            (v, c)
        })
        .collect();
    let mut s = String::new();
    let title = format!("tunbench report: lab {}", r.lab);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        esc(&title)
    );
    let _ = writeln!(
        s,
        "<header><h1>{}</h1><p class=\"meta\">{}</p></header>",
        esc(&title),
        esc(&heading(r))
    );

    let hosts = super::hosts::section(r);
    let notes = super::hosts::all_notes(r);
    s.push_str("<nav><h2>Contents</h2><ol>\n<li><a href=\"#paths\">Paths</a></li>\n");
    if hosts.is_some() {
        let _ = writeln!(
            s,
            "<li><a href=\"#underlays\">{}</a></li>",
            super::hosts::TITLE
        );
    }
    for (v, _) in &views {
        let _ = writeln!(
            s,
            "<li><a href=\"#view-{}\">{}</a></li>",
            esc(&v.id),
            esc(&v.title)
        );
    }
    if !notes.is_empty() {
        s.push_str("<li><a href=\"#notes\">Notes</a></li>\n");
    }
    s.push_str("<li><a href=\"#topology\">Topology</a></li>\n</ol></nav>\n");

    s.push_str("<section class=\"plain\" id=\"paths\"><h2>Paths</h2>\n");
    if r.paths.is_empty() {
        s.push_str("<p>No paths measured.</p>\n");
    } else {
        s.push_str("<ul>\n");
        for p in &r.paths {
            let _ = writeln!(s, "<li>{}</li>", esc(&path_line(p)));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("</section>\n");
    if let Some(h) = &hosts {
        underlays(&mut s, h);
    }

    for (v, charts) in &views {
        view(&mut s, v, charts);
    }

    if !notes.is_empty() {
        s.push_str("<section class=\"plain\" id=\"notes\"><h2>Notes</h2>\n<ul class=\"notes\">\n");
        for n in &notes {
            let _ = writeln!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>\n</section>\n");
    }

    s.push_str("<section class=\"plain\" id=\"topology\"><h2>Topology</h2>\n");
    let file = r.topology.as_deref().unwrap_or("(not recorded)");
    match graph {
        Ok(g) => {
            let _ = writeln!(
                s,
                "<p>{} as <code>tunbench graph --format svg</code> draws it: columns by hops \
                 from the first host, tunnels dashed (hover a line for its interfaces).</p>\n\
                 <div class=\"graph\">{}</div>\n<details><summary>The same in Graphviz dot \
                 (<code>tunbench graph</code>)</summary>\n<pre class=\"graph\">{}</pre></details>",
                esc(file),
                g.svg,
                esc(g.dot)
            );
        }
        Err(why) => {
            let _ = writeln!(
                s,
                "<p class=\"missing\">The topology's graph is not in this page: {}.</p>",
                esc(&why)
            );
        }
    }
    s.push_str("</section>\n");
    let _ = writeln!(
        s,
        "<footer>Written by {}; every figure comes from the results above, nothing was \
         fetched to draw this page.</footer>\n<script>{CHECK}</script>\n</body>\n</html>",
        esc(&r.tool)
    );
    s
}

/// A view: its heading, question, charts, table, legend, footnotes, notes.
fn view(s: &mut String, v: &View, charts: &[Chart]) {
    let _ = writeln!(
        s,
        "<section class=\"view\" id=\"view-{}\" data-charts=\"{}\">\n<h2>{}</h2>\n<p class=\"question\">{}</p>",
        esc(&v.id),
        charts.len(),
        esc(&v.title),
        esc(&v.question)
    );
    if !charts.is_empty() {
        s.push_str("<div class=\"charts\">\n");
        for c in charts {
            s.push_str(&c.svg);
        }
        s.push_str("</div>\n");
    }

    s.push_str("<table>\n<thead><tr>");
    for c in &v.columns {
        let _ = write!(
            s,
            "<th{}>{}</th>",
            if c.left() { "" } else { " class=\"num\"" },
            esc(c.header())
        );
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    let mut footnotes = Vec::new();
    let mut last_first = None;
    for row in &v.rows {
        let first = v.columns.first().map(|c| c.text(row));
        let starts = first != last_first;
        let _ = write!(s, "<tr{}>", if starts { " class=\"group\"" } else { "" });
        for (i, c) in v.columns.iter().enumerate() {
            let mut text = if i == 0 && !starts {
                String::new()
            } else {
                c.text(row)
            };
            let mut class = Vec::new();
            if !c.left() {
                class.push("num");
            }
            if *c == Column::Verdict && text.starts_with("OUT") {
                class.push("out");
            }
            let note = match (c, footnote(row)) {
                (Column::Rate | Column::Verdict, Some(f)) if !footnotes.contains(&f) => {
                    footnotes.push(f);
                    class.push("failed");
                    format!("<sup>[{}]</sup>", footnotes.len())
                }
                _ => String::new(),
            };
            text = esc(&text);
            let class = if class.is_empty() {
                String::new()
            } else {
                format!(" class=\"{}\"", class.join(" "))
            };
            let _ = write!(s, "<td{class}>{text}{note}</td>");
        }
        s.push_str("</tr>\n");
        last_first = first;
    }
    s.push_str("</tbody>\n</table>\n");
    if !v.legend.is_empty() {
        s.push_str("<div class=\"legend\">");
        for l in &v.legend {
            let _ = write!(s, "<p>{}</p>", esc(l));
        }
        s.push_str("</div>\n");
    }
    list(s, "ol", "footnotes", &footnotes);
    list(s, "ul", "notes", &v.notes);
    s.push_str("</section>\n");
}

/// The underlays between hosts and the hosts each path crosses.
fn underlays(s: &mut String, h: &super::hosts::Section) {
    let _ = writeln!(
        s,
        "<section class=\"plain\" id=\"underlays\"><h2>{}</h2>\n<p class=\"legend\">{}</p>",
        super::hosts::TITLE,
        esc(&h.legend)
    );
    list(s, "ul", "underlays", &h.underlays);
    list(s, "ul", "crossed", &h.paths);
    s.push_str("</section>\n");
}

fn list(s: &mut String, tag: &str, class: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(s, "<{tag} class=\"{class}\">");
    for i in items {
        let _ = writeln!(s, "<li>{}</li>", esc(i));
    }
    let _ = writeln!(s, "</{tag}>");
}

#[cfg(test)]
mod tests {
    use super::super::{fixture, views};
    use super::*;

    fn main_page() -> String {
        page(
            &fixture::main_job(),
            None,
            Ok(Graph {
                svg: "<svg class=\"topology\"></svg>",
                dot: "graph \"home\" {\n  \"pc\" -- \"nvr500\";\n}\n",
            }),
        )
    }

    #[test]
    fn every_view_with_its_heading_question_table_and_charts() {
        let r = fixture::main_job();
        let html = main_page();
        assert!(html.starts_with("<!DOCTYPE html>\n"));
        assert!(html.ends_with("</html>\n"));
        for v in views::views(&r) {
            let start = html
                .find(&format!("<section class=\"view\" id=\"view-{}\"", v.id))
                .unwrap_or_else(|| panic!("no section {}", v.id));
            let section = &html[start..start + html[start..].find("</section>").unwrap()];
            let n = chart::charts(&v).len();
            assert!(n > 0, "{}", v.id);
            assert!(
                section.contains(&format!("data-charts=\"{n}\"")),
                "{}",
                v.id
            );
            assert_eq!(section.matches("<svg ").count(), n, "{}", v.id);
            assert!(section.contains(&format!("<h2>{}</h2>", esc(&v.title))));
            assert!(section.contains(&esc(&v.question)));
            assert_eq!(section.matches("<tr").count(), v.rows.len() + 1, "{}", v.id);
        }
        // The published comparison with its verdicts; the notes; the graph.
        assert!(
            html.contains("<td class=\"out\">OUT (-25 %)</td>"),
            "a figure out of tolerance"
        );
        assert!(html.contains("24 of 25 cells within tolerance"));
        assert!(html.contains("<section class=\"plain\" id=\"notes\">"));
        assert!(html.contains("calibrated from the NVR500 study&apos;s figures"));
        assert!(html.contains(
            "<pre class=\"graph\">graph &quot;home&quot; {\n  &quot;pc&quot; -- &quot;nvr500&quot;;"
        ));
        // Nothing to fetch: no external reference of any kind.
        for outside in ["http://", "https://", "src=", "<link", "@import", "url("] {
            let hits: Vec<&str> = html
                .match_indices(outside)
                .map(|(i, _)| &html[i.saturating_sub(40)..(i + 40).min(html.len())])
                .filter(|ctx| !ctx.contains("www.w3.org/2000/svg"))
                .collect();
            assert!(hits.is_empty(), "{outside}: {hits:?}");
        }
    }

    #[test]
    fn calibrated_predicted_and_the_models_predictions() {
        let r = fixture::calibrated();
        let html = page(&r, None, Err("not given".into()));
        let section = |id: &str| {
            let start = html
                .find(&format!("<section class=\"view\" id=\"view-{id}\""))
                .unwrap_or_else(|| panic!("no section {id}"));
            html[start..start + html[start..].find("</section>").unwrap()].to_string()
        };
        let published = section("published");
        assert!(
            published.contains("<th>tolerance</th><th>basis</th></tr>"),
            "{published}"
        );
        assert!(
            published.contains("<td class=\"out\">OUT (-25 %)</td><td>calibrated</td></tr>"),
            "{published}"
        );
        assert_eq!(published.matches("<td>calibrated</td>").count(), 9);
        assert_eq!(published.matches("<td>predicted</td>").count(), 18);
        assert!(published.contains(
            "<li>8 of 9 calibrated cells reproduced within tolerance; 17 of 17 predicted cells within \
             tolerance (1 not measured); tolerance TCP +-15 %, UDP +-25 %</li>"
        ));
        assert!(published.contains(
            "<li>not predicted: RBBS multi-session speed test (FLET&apos;S), with or without the NVR500, \
             published 300 Mbit/s: its limit is the NGN&apos;s test server, which the lab does not model</li>"
        ));
        let predictions = section("predictions");
        assert!(predictions.contains("<h2>Predictions for cells nobody published</h2>"));
        assert!(
            predictions.contains("data-charts=\"1\""),
            "a throughput chart"
        );
        assert!(predictions.contains(
            "<td class=\"num\">30.0 (29.7 rcvd, 1.0 % lost)</td><td>nvr500 fast path ipv4 udp upload ceiling 30.12 Mbit/s</td>"
        ), "{predictions}");
        assert!(html.find("id=\"view-predictions\"") > html.find("id=\"view-published\""));
        // Unmarked, the page has neither.
        let html = page(&fixture::main_job(), None, Err("not given".into()));
        assert!(!html.contains("<th>basis</th>") && !html.contains("view-predictions"));
    }

    #[test]
    fn a_failed_cell_is_footnoted_and_a_missing_topology_said() {
        let html = page(
            &fixture::results(),
            None,
            Err("topology file nvr500-home.toml: not found".into()),
        );
        assert!(
            html.contains("<td class=\"num failed\">failed<sup>[1]</sup></td>"),
            "{html}"
        );
        assert!(html.contains(
            "<li>wg IPv6 TCP Sender: connecting to [fd00:9::2]:5201: connection refused</li>"
        ));
        assert!(html.contains(
            "The topology's graph is not in this page: topology file nvr500-home.toml: not found."
        ));
    }

    #[test]
    fn everything_from_the_data_is_escaped() {
        let mut r = fixture::main_job();
        r.lab = "<script>alert(1)</script>".into();
        r.paths[1].path = "w<g>&\"x\"".into();
        r.notes.push("<img src=x onerror=alert(1)>".into());
        let html = page(
            &r,
            None,
            Ok(Graph {
                svg: "",
                dot: "</pre><script>bad()</script>",
            }),
        );
        assert_eq!(html.matches("<script>").count(), 1, "only the page's own");
        assert!(!html.contains("<img"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("w&lt;g&gt;&amp;&quot;x&quot;"));
    }
}

/// The page in a real browser: Debian's headless Chromium opens the main
/// job's page (from the fixture), and a deliberately broken copy of it to
/// show the checks can fail.
#[cfg(test)]
mod browser {
    use super::super::{chart, fixture, views};
    use super::{Graph, page};
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::{Duration, Instant};

    const WIDTH: u32 = 1280;
    const HEIGHT: u32 = 2400;

    struct Opened {
        dom: String,
        /// Chromium's console lines: the page's messages and uncaught errors.
        console: Vec<String>,
    }

    /// Runs chromium headless on `page` with `args`, killed after 90 s. Headless
    /// Chromium now and then never exits after `--dump-dom` (seen once in
    /// about twenty suite runs, with the page already loaded): a run that
    /// hangs is killed and made once more with a fresh profile; two hangs
    /// fail. A page that really never finishes (a script in a loop) hangs
    /// both times.
    fn chromium(dir: &Path, profile: &str, args: &[String], page: &Path) -> (String, String) {
        for attempt in 1..=2 {
            let name = format!("{profile}-{attempt}");
            if let Some(ran) = chromium_once(dir, &name, args, page) {
                return ran;
            }
        }
        panic!(
            "chromium did not finish within 90 s on {}, twice",
            page.display()
        );
    }

    /// One chromium run: its stdout and stderr, or None if it was still
    /// running after 90 s (then killed).
    fn chromium_once(
        dir: &Path,
        profile: &str,
        args: &[String],
        page: &Path,
    ) -> Option<(String, String)> {
        let (out, err) = (
            dir.join(format!("{profile}.out")),
            dir.join(format!("{profile}.err")),
        );
        let mut cmd = Command::new("chromium");
        cmd.args([
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", dir.join(profile).display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        // Files, not pipes: a pipe nobody reads stops a large DOM dump.
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
        // As root Chromium's sandbox refuses to start.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("--no-sandbox");
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!(
                "running chromium: {e}: install Debian's package chromium (scripts/setup.sh does)"
            ),
        };
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("waiting for chromium") {
                break s;
            }
            if start.elapsed() > Duration::from_secs(90) {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
        assert!(
            status.success(),
            "chromium failed ({status}): {}",
            read(&err)
        );
        Some((read(&out), read(&err)))
    }

    /// The DOM after load and every console message (Chromium logs each as
    /// "INFO:CONSOLE" whatever its level: the page itself logs nothing, so
    /// any is a fault).
    fn open(dir: &Path, profile: &str, page: &Path) -> Opened {
        let args = ["--enable-logging=stderr", "--v=0", "--dump-dom"].map(String::from);
        let (dom, log) = chromium(dir, profile, &args, page);
        Opened {
            dom,
            console: log
                .lines()
                .filter(|l| l.contains(":CONSOLE"))
                .map(String::from)
                .collect(),
        }
    }

    /// What a page must show: every view's section with all its charts, the
    /// checking script's verdict, and no console message.
    fn faults(o: &Opened, views: &[(String, usize)]) -> Vec<String> {
        let mut f: Vec<String> = o.console.iter().map(|l| format!("console: {l}")).collect();
        if !o.dom.contains("<body data-charts=\"ok\">") {
            f.push("the page's own check did not pass (no data-charts=\"ok\")".into());
        }
        for (id, n) in views {
            let Some(start) = o.dom.find(&format!("id=\"view-{id}\"")) else {
                f.push(format!("no section for view {id}"));
                continue;
            };
            let end = o.dom[start..]
                .find("</section>")
                .map_or(o.dom.len(), |e| start + e);
            let have = o.dom[start..end].matches("<svg ").count();
            if have != *n {
                f.push(format!("view {id}: {have} charts of {n}"));
            }
        }
        f
    }

    /// (pixels that are not the page's background, distinct colours, how
    /// many of the charts' first colours appear).
    fn look(png_file: &Path) -> (f64, usize, usize) {
        let file = std::fs::File::open(png_file).expect("the screenshot");
        let mut d = png::Decoder::new(std::io::BufReader::new(file));
        d.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut reader = d.read_info().expect("a PNG");
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).expect("a PNG frame");
        let channels = info.color_type.samples();
        assert!(channels >= 3, "{:?}", info.color_type);
        assert_eq!((info.width, info.height), (WIDTH, HEIGHT));
        let px: Vec<[u8; 3]> = buf[..info.buffer_size()]
            .chunks(channels)
            .map(|c| [c[0], c[1], c[2]])
            .collect();
        // The page's background and the sections' and charts' white.
        let paper = [[0xfa, 0xfa, 0xfa], [0xff, 0xff, 0xff]];
        let ink = px.iter().filter(|p| !paper.contains(p)).count() as f64 / px.len() as f64;
        let mut distinct: Vec<[u8; 3]> = px.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let near = |a: [u8; 3], b: [u8; 3]| a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= 4);
        let palette = (0..6)
            .map(|i| {
                let c =
                    u32::from_str_radix(&super::super::draw::colour::colour(i)[1..], 16).unwrap();
                [(c >> 16) as u8, (c >> 8) as u8, c as u8]
            })
            .filter(|c| distinct.iter().any(|p| near(*p, *c)))
            .count();
        (ink, distinct.len(), palette)
    }

    #[test]
    fn chromium_renders_every_chart_without_errors() {
        let dir = tempfile::tempdir().unwrap();
        // The main job with its calibration marked: every view, the
        // predictions' included.
        let r = fixture::calibrated();
        let html = page(
            &r,
            None,
            Ok(Graph {
                svg: "<svg class=\"topology\" width=\"10\" height=\"10\"></svg>",
                dot: "graph \"home\" {\n}\n",
            }),
        );
        let views: Vec<(String, usize)> = views::views(&r)
            .iter()
            .map(|v| (v.id.clone(), chart::charts(v).len()))
            .collect();
        let good: PathBuf = dir.path().join("report.html");
        std::fs::write(&good, &html).unwrap();
        // The same page broken twice over: a chart taken out of one view, and
        // a script that throws.
        let first_svg = html.find("<svg ").unwrap();
        let end = first_svg + html[first_svg..].find("</svg>").unwrap() + "</svg>".len();
        let broken_html = format!("{}{}", &html[..first_svg], &html[end..]).replace(
            "</body>",
            "<script>throw new Error('deliberately broken');</script></body>",
        );
        let broken = dir.path().join("broken.html");
        std::fs::write(&broken, broken_html).unwrap();

        let shot = dir.path().join("report.png");
        let (d, g, b, s) = (dir.path(), good.clone(), broken.clone(), shot.clone());
        let both = std::thread::scope(|scope| {
            let on_good = scope.spawn(|| open(d, "good", &g));
            let on_broken = scope.spawn(|| open(d, "broken", &b));
            let args = [
                format!("--screenshot={}", s.display()),
                format!("--window-size={WIDTH},{HEIGHT}"),
            ];
            chromium(d, "shot", &args, &g);
            (on_good.join().unwrap(), on_broken.join().unwrap())
        });
        let (on_good, on_broken) = both;

        let f = faults(&on_good, &views);
        assert!(f.is_empty(), "the page in Chromium: {f:#?}");
        // The checks catch what they are for.
        let f = faults(&on_broken, &views);
        assert!(
            f.iter()
                .any(|x| x.contains("Uncaught Error: deliberately broken")),
            "{f:#?}"
        );
        assert!(
            f.iter()
                .any(|x| x.contains("tunbench: charts missing: view-published: 0 of 1")),
            "{f:#?}"
        );
        assert!(f.iter().any(|x| x.contains("did not pass")), "{f:#?}");
        assert!(
            f.iter().any(|x| x == "view published: 0 charts of 1"),
            "{f:#?}"
        );

        let (ink, colours, palette) = look(&shot);
        eprintln!(
            "screenshot: {:.1} % ink, {colours} colours, {palette} of 6 chart colours",
            ink * 100.0
        );
        assert!(
            ink > 0.05,
            "the screenshot is nearly blank: {:.1} % ink",
            ink * 100.0
        );
        assert!(colours > 200, "only {colours} colours in the screenshot");
        assert!(
            palette >= 4,
            "only {palette} of the charts' first six colours drawn"
        );
        // TUNBENCH_SCREENSHOT=PREFIX keeps PREFIX.png and PREFIX.html for a look.
        if let Ok(keep) = std::env::var("TUNBENCH_SCREENSHOT") {
            std::fs::copy(&shot, format!("{keep}.png")).unwrap();
            std::fs::copy(&good, format!("{keep}.html")).unwrap();
        }
    }
}
