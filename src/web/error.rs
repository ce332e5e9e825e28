//! What can go wrong serving: the server itself ([`WebError`]: the port,
//! the repository), and one page ([`PageError`]: not found, bad input, or
//! the repository could not be read), which becomes that page's answer.

use crate::store::StoreError;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("the server failed: {0}")]
    Serve(#[source] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The answer a page gives instead of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageError {
    /// The HTTP status: 400, 404 or 500.
    pub status: u16,
    pub message: String,
}

impl PageError {
    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: 404,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: 400,
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            status: 500,
            message: message.into(),
        }
    }
}

impl From<StoreError> for PageError {
    fn from(e: StoreError) -> Self {
        Self::internal(format!("the repository could not be read: {e}"))
    }
}

impl From<crate::run::RunError> for PageError {
    fn from(e: crate::run::RunError) -> Self {
        Self::internal(e.to_string())
    }
}

impl From<crate::plan::revisions::RevisionError> for PageError {
    fn from(e: crate::plan::revisions::RevisionError) -> Self {
        match e {
            crate::plan::revisions::RevisionError::NoSuchPlan(_)
            | crate::plan::revisions::RevisionError::NoSuchRevision { .. } => {
                Self::not_found(e.to_string())
            }
            e => Self::internal(e.to_string()),
        }
    }
}

impl From<crate::approval::ApprovalError> for PageError {
    fn from(e: crate::approval::ApprovalError) -> Self {
        Self::internal(e.to_string())
    }
}

impl From<crate::ids::IdError> for PageError {
    fn from(e: crate::ids::IdError) -> Self {
        Self::bad_request(e.to_string())
    }
}
