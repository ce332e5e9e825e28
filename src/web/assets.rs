//! The only script and style any page loads, built into the binary: the
//! Content-Security-Policy allows nothing else.

/// The style sheet.
pub const STYLE: &str = include_str!("assets/style.css");
/// The script: follows a page's live stream.
pub const SCRIPT: &str = include_str!("assets/app.js");

/// The asset called `name`, with its content type.
pub fn get(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        "style.css" => Some(("text/css; charset=utf-8", STYLE)),
        "app.js" => Some(("text/javascript; charset=utf-8", SCRIPT)),
        _ => None,
    }
}
