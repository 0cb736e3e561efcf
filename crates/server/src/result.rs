//! Result codes (RFC 4511 §4.1.9 and extensions) and the error type operations return.

/// Numeric LDAP result codes used by the server.
pub mod code {
    pub const SUCCESS: u32 = 0;
    pub const OPERATIONS_ERROR: u32 = 1;
    pub const PROTOCOL_ERROR: u32 = 2;
    pub const TIME_LIMIT_EXCEEDED: u32 = 3;
    pub const SIZE_LIMIT_EXCEEDED: u32 = 4;
    pub const COMPARE_FALSE: u32 = 5;
    pub const COMPARE_TRUE: u32 = 6;
    pub const AUTH_METHOD_NOT_SUPPORTED: u32 = 7;
    pub const STRONG_AUTH_REQUIRED: u32 = 8;
    pub const REFERRAL: u32 = 10;
    pub const ADMIN_LIMIT_EXCEEDED: u32 = 11;
    pub const UNAVAILABLE_CRITICAL_EXTENSION: u32 = 12;
    pub const CONFIDENTIALITY_REQUIRED: u32 = 13;
    pub const NO_SUCH_ATTRIBUTE: u32 = 16;
    pub const UNDEFINED_ATTRIBUTE_TYPE: u32 = 17;
    pub const ATTRIBUTE_OR_VALUE_EXISTS: u32 = 20;
    pub const CONSTRAINT_VIOLATION: u32 = 19;
    pub const INAPPROPRIATE_MATCHING: u32 = 18;
    pub const NO_SUCH_OBJECT: u32 = 32;
    pub const ALIAS_PROBLEM: u32 = 33;
    pub const INVALID_DN_SYNTAX: u32 = 34;
    pub const ALIAS_DEREFERENCING_PROBLEM: u32 = 36;
    pub const INAPPROPRIATE_AUTHENTICATION: u32 = 48;
    pub const INVALID_CREDENTIALS: u32 = 49;
    pub const INSUFFICIENT_ACCESS_RIGHTS: u32 = 50;
    pub const BUSY: u32 = 51;
    pub const UNAVAILABLE: u32 = 52;
    pub const UNWILLING_TO_PERFORM: u32 = 53;
    pub const OTHER: u32 = 80;
    pub const CANCELED: u32 = 118;
    pub const NO_SUCH_OPERATION: u32 = 119;
    pub const TOO_LATE: u32 = 120;
    pub const CANNOT_CANCEL: u32 = 121;
    pub const ASSERTION_FAILED: u32 = 122;
    pub const AUTHORIZATION_DENIED: u32 = 123;
}

/// A failed operation: the result code, a message for the client, and the matchedDN when known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("result {code}: {message}")]
pub struct OperationError {
    pub code: u32,
    pub message: String,
    pub matched_dn: String,
    /// Controls the failure's response carries (the password policy control's error).
    pub controls: Vec<crate::ber::ResponseControl>,
    /// Where to go instead (result referral, 10): the provider of a read-only replica.
    pub referral: Vec<String>,
    /// An extended response's value sent with the failure (End Transaction names the update
    /// that failed).
    pub extended_value: Option<Box<[u8]>>,
}

impl OperationError {
    pub fn new(code: u32, message: impl Into<String>) -> Self {
        OperationError {
            code,
            message: message.into(),
            matched_dn: String::new(),
            controls: Vec::new(),
            referral: Vec::new(),
            extended_value: None,
        }
    }

    /// The result referral (10) sending the client to `url`.
    pub fn referral(url: &str, message: impl Into<String>) -> Self {
        OperationError {
            referral: vec![url.to_string()],
            ..OperationError::new(code::REFERRAL, message)
        }
    }

    pub fn with_control(mut self, control: crate::ber::ResponseControl) -> Self {
        self.controls.push(control);
        self
    }

    pub fn with_matched_dn(mut self, matched_dn: impl Into<String>) -> Self {
        self.matched_dn = matched_dn.into();
        self
    }
}
