//! One [`Figure`] as a one-page vector PDF: the figure's SVG ([`super::svg`]) converted
//! by svg2pdf (usvg parses and lays out the SVG, svg2pdf writes the PDF), so both files
//! show the same picture. Text stays text, in a sans-serif TrueType/OpenType font of
//! this machine embedded as a subset — the form journals accept for figures. The page
//! is the figure's size at 96 SVG units per inch (6.7 inches wide).
//!
//! The font: the file `CLUSTERQOS_FONT` names, else the first of DejaVu Sans,
//! Liberation Sans, Arial, Helvetica, Noto Sans, FreeSans installed, else the
//! system's own sans-serif choice, else any installed font. With no font at all
//! [`render`] says so and the report is written without PDFs.

#[cfg(feature = "pdf")]
use std::sync::{Arc, OnceLock};

#[cfg(feature = "pdf")]
use svg2pdf::usvg::{self, fontdb};
#[cfg(feature = "pdf")]
use svg2pdf::{ConversionOptions, PageOptions};

#[cfg(feature = "pdf")]
use super::svg;
use super::Figure;

#[cfg(feature = "pdf")]
/// Sans-serif families preferred, in order, where installed (metric-compatible or
/// close to what a browser shows for the SVG).
const PREFERRED: [&str; 6] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Arial",
    "Helvetica",
    "Noto Sans",
    "FreeSans",
];

#[cfg(feature = "pdf")]
/// SVG user units per inch: the PDF page is the SVG's size on paper.
const SVG_DPI: f32 = 96.0;

/// Why a figure has no PDF.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PdfError {
    /// No font for the text.
    #[error(
        "no font for the figures' text: install one (Debian: fonts-dejavu-core) or set \
         CLUSTERQOS_FONT to a .ttf or .otf file"
    )]
    NoFont,
    /// `CLUSTERQOS_FONT` names no readable font.
    #[error("CLUSTERQOS_FONT={0}: not a readable TrueType or OpenType font")]
    BadFont(String),
    /// This program was built without PDF output (the `pdf` feature: the simulator-only
    /// build of the main job leaves it out to build in a fraction of the time).
    #[error(
        "this build writes no PDFs (built without the `pdf` feature; \
         `cargo build --release -p clusterqos` has it)"
    )]
    NotBuilt,
    /// svg2pdf refused the drawing.
    #[error("converting the figure's SVG to PDF: {0}")]
    Convert(String),
}

#[cfg(feature = "pdf")]
/// The fonts the text is drawn with, found once per process.
fn fonts() -> Result<&'static Arc<fontdb::Database>, PdfError> {
    static FONTS: OnceLock<Result<Arc<fontdb::Database>, PdfError>> = OnceLock::new();
    FONTS
        .get_or_init(|| load_fonts().map(Arc::new))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(feature = "pdf")]
fn load_fonts() -> Result<fontdb::Database, PdfError> {
    let mut db = fontdb::Database::new();
    if let Some(path) = std::env::var_os("CLUSTERQOS_FONT") {
        let shown = std::path::Path::new(&path).display().to_string();
        db.load_font_file(&path)
            .map_err(|_| PdfError::BadFont(shown.clone()))?;
        let family = first_family(&db).ok_or(PdfError::BadFont(shown))?;
        db.set_sans_serif_family(family);
        return Ok(db);
    }
    db.load_system_fonts();
    let has = |db: &fontdb::Database, name: &str| {
        db.faces()
            .any(|f| f.families.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)))
    };
    let family = PREFERRED
        .iter()
        .find(|name| has(&db, name))
        .map(|name| name.to_string())
        .or_else(|| {
            let configured = db.family_name(&fontdb::Family::SansSerif).to_string();
            has(&db, &configured).then_some(configured)
        })
        .or_else(|| first_family(&db))
        .ok_or(PdfError::NoFont)?;
    db.set_sans_serif_family(family);
    Ok(db)
}

#[cfg(feature = "pdf")]
/// The family name of the first face in `db`.
fn first_family(db: &fontdb::Database) -> Option<String> {
    db.faces()
        .find_map(|f| f.families.first().map(|(name, _)| name.clone()))
}

#[cfg(feature = "pdf")]
/// Whether [`render`] can write PDFs on this machine (a font was found), and why not.
pub fn available() -> Result<(), PdfError> {
    fonts().map(|_| ())
}

#[cfg(feature = "pdf")]
/// The sans-serif family the figures' text is set in.
pub fn font_family() -> Result<String, PdfError> {
    Ok(fonts()?.family_name(&fontdb::Family::SansSerif).to_string())
}

#[cfg(feature = "pdf")]
/// Renders `fig` as a PDF document.
pub fn render(fig: &Figure) -> Result<Vec<u8>, PdfError> {
    let fontdb = fonts()?.clone();
    let options = usvg::Options {
        fontdb,
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(&svg::render(fig), &options)
        .map_err(|e| PdfError::Convert(e.to_string()))?;
    svg2pdf::to_pdf(
        &tree,
        ConversionOptions::default(),
        PageOptions { dpi: SVG_DPI },
    )
    .map_err(|e| PdfError::Convert(e.to_string()))
}

/// Whether [`render`] can write PDFs: never in a build without the `pdf` feature.
#[cfg(not(feature = "pdf"))]
pub fn available() -> Result<(), PdfError> {
    Err(PdfError::NotBuilt)
}

/// The sans-serif family the figures' text is set in: none without the `pdf` feature.
#[cfg(not(feature = "pdf"))]
pub fn font_family() -> Result<String, PdfError> {
    Err(PdfError::NotBuilt)
}

/// Renders `fig` as a PDF document: refused without the `pdf` feature.
#[cfg(not(feature = "pdf"))]
pub fn render(_fig: &Figure) -> Result<Vec<u8>, PdfError> {
    Err(PdfError::NotBuilt)
}

#[cfg(all(test, feature = "pdf"))]
mod tests {
    use super::super::Series;
    use super::*;

    #[test]
    fn a_figure_is_a_one_page_pdf_of_the_svgs_size_with_its_font_embedded() {
        if let Err(e) = available() {
            eprintln!("SKIPPED: {e}");
            return;
        }
        let fig = Figure::new(
            "f",
            "Fig 5.3: Effect of IDT",
            "IDT (ticks)",
            "Bandwidth (MB/s)",
        )
        .with_series(Series::new("GM level", vec![(0.0, 81.8), (2000.0, 4.0)]));
        let pdf = render(&fig).unwrap();
        assert!(pdf.starts_with(b"%PDF-"), "not a PDF");
        let text = String::from_utf8_lossy(&pdf);
        assert_eq!(text.matches("/Type /Page\n").count(), 1, "one page");
        // 640 SVG units at 96 per inch: 480 points wide.
        assert!(text.contains("/MediaBox [0 0 480 "), "page size");
        // The text is text, in an embedded subset of the chosen font.
        let family = font_family().unwrap().replace(' ', "");
        assert!(
            text.contains("/FontFile2") || text.contains("/FontFile3"),
            "font embedded"
        );
        assert!(text.contains(&family), "font {family} named");
        // Same figure, same document: svg2pdf numbers its font objects in hash-map
        // order, so the bytes may be permuted but not changed in size.
        assert_eq!(render(&fig).unwrap().len(), pdf.len());
    }
}
