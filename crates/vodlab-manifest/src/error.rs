//! Errors of manifest parsing.

use thiserror::Error;

/// A manifest that cannot be turned into a [`crate::Presentation`]; every
/// variant names where in the manifest the problem is.
#[derive(Debug, Error, PartialEq)]
pub enum ManifestError {
    /// Not well-formed XML, or not an MPD.
    #[error("MPD: {0}")]
    Xml(String),
    /// Not a well-formed HLS playlist.
    #[error("HLS playlist: {0}")]
    Playlist(String),
    /// A master playlist was expected and a media playlist found, or the reverse.
    #[error("HLS playlist: expected a {expected} playlist, found a {found} playlist")]
    WrongPlaylistKind {
        /// What the caller asked for.
        expected: &'static str,
        /// What the text is.
        found: &'static str,
    },
    /// A required element or attribute is missing.
    #[error("{at}: missing {what}")]
    Missing {
        /// Path of the element, e.g. `Period[0]/AdaptationSet[0]/Representation[2]`.
        at: String,
        /// What is missing.
        what: &'static str,
    },
    /// A value is present but unusable.
    #[error("{at}: {what}")]
    Invalid {
        /// Path of the element.
        at: String,
        /// What is wrong with it.
        what: String,
    },
    /// A feature this parser does not follow (live MPDs, SegmentTimeline,
    /// SegmentBase with a sidx index, multiple periods).
    #[error("{at}: {what} is not supported")]
    Unsupported {
        /// Path of the element.
        at: String,
        /// The feature.
        what: &'static str,
    },
}
