//! Renders a [`Report`] as `index.html`: title, summary, tables, each figure's SVG
//! (linked, not inlined, so each plot stays its own file) with links to its PDF, CSV and
//! JSON, and the closing notes. Plain HTML with a small inline stylesheet; no scripts.

use super::pdf::PdfError;
use super::{escape, Cell, Report};

/// The index page of `report`; `no_pdf` says why the figures have no PDF, when they
/// have none.
pub fn render(report: &Report, no_pdf: Option<PdfError>) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str(&format!("<title>{}</title>\n", escape(&report.title)));
    o.push_str(
        "<style>\nbody{font-family:Helvetica,Arial,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\n\
         table{border-collapse:collapse;margin:1em 0}\nth,td{border:1px solid #bbb;padding:3px 8px;text-align:left}\n\
         th{background:#f0f0f0}\ntd.num{text-align:right}\n\
         .fail{background:#fbe3e3}\nfigure{margin:2em 0}\nfigcaption{font-size:90%;color:#444}\n\
         .links{font-size:85%}\n</style>\n</head>\n<body>\n",
    );
    o.push_str(&format!("<h1>{}</h1>\n", escape(&report.title)));
    for p in &report.summary {
        o.push_str(&format!("<p>{}</p>\n", escape(p)));
    }
    for t in &report.tables {
        o.push_str(&format!(
            "<h2 id=\"{}\">{}</h2>\n<p class=\"links\"><a href=\"{}.csv\">CSV</a> · <a href=\"{}.json\">JSON</a></p>\n<table>\n<tr>",
            escape(&t.id),
            escape(&t.title),
            escape(&t.id),
            escape(&t.id)
        ));
        let shown = t.page_indices();
        for &i in &shown {
            o.push_str(&format!("<th>{}</th>", escape(&t.columns[i])));
        }
        o.push_str("</tr>\n");
        for r in &t.rows {
            // A row with a verdict "miss" is a failed check: highlight it.
            let fail = r.iter().any(|c| matches!(c, Cell::Text(t) if t == "miss"));
            o.push_str(if fail { "<tr class=\"fail\">" } else { "<tr>" });
            for c in shown.iter().filter_map(|&i| r.get(i)) {
                let class = if c.is_number() { " class=\"num\"" } else { "" };
                o.push_str(&format!("<td{class}>{}</td>", escape(&c.shown())));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
    }
    if !report.figures.is_empty() {
        o.push_str("<h2>Figures</h2>\n");
        if let Some(why) = &no_pdf {
            o.push_str(&format!(
                "<p>No PDF of the figures: {}.</p>\n",
                escape(&why.to_string())
            ));
        }
    }
    for f in &report.figures {
        let id = escape(&f.id);
        let pdf = if no_pdf.is_none() {
            format!(" · <a href=\"{id}.pdf\">PDF</a>")
        } else {
            String::new()
        };
        // The picture at its own size (the SVG's width and height).
        o.push_str(&format!(
            "<figure id=\"{id}\">\n<img src=\"{id}.svg\" alt=\"{}\">\n<figcaption>{}<span class=\"links\"><a href=\"{id}.svg\">SVG</a>{pdf} · <a href=\"{id}.csv\">CSV</a> · <a href=\"{id}.json\">JSON</a></span></figcaption>\n</figure>\n",
            escape(&f.title),
            if f.caption.is_empty() {
                String::new()
            } else {
                format!("{}<br>", escape(&f.caption))
            }
        ));
    }
    if !report.notes.is_empty() {
        o.push_str("<h2>Notes</h2>\n");
        for p in &report.notes {
            o.push_str(&format!("<p>{}</p>\n", escape(p)));
        }
    }
    o.push_str("</body>\n</html>\n");
    o
}
