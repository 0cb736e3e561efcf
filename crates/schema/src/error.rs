//! LDAP result codes (RFC 4511 §4.1.9 and later RFCs) and the error type every crate returns.

use std::fmt;

/// An LDAP result code with its protocol number (`code()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultCode {
    Success,
    OperationsError,
    ProtocolError,
    TimeLimitExceeded,
    SizeLimitExceeded,
    CompareFalse,
    CompareTrue,
    AuthMethodNotSupported,
    StrongerAuthRequired,
    Referral,
    AdminLimitExceeded,
    UnavailableCriticalExtension,
    ConfidentialityRequired,
    SaslBindInProgress,
    NoSuchAttribute,
    UndefinedAttributeType,
    InappropriateMatching,
    ConstraintViolation,
    AttributeOrValueExists,
    InvalidAttributeSyntax,
    NoSuchObject,
    AliasProblem,
    InvalidDnSyntax,
    AliasDereferencingProblem,
    InappropriateAuthentication,
    InvalidCredentials,
    InsufficientAccessRights,
    Busy,
    Unavailable,
    UnwillingToPerform,
    LoopDetect,
    NamingViolation,
    ObjectClassViolation,
    NotAllowedOnNonLeaf,
    NotAllowedOnRdn,
    EntryAlreadyExists,
    ObjectClassModsProhibited,
    AffectsMultipleDsas,
    Other,
    /// RFC 3909 Cancel operation results.
    Canceled,
    NoSuchOperation,
    TooLate,
    CannotCancel,
    /// RFC 4528 assertion control.
    AssertionFailed,
    /// RFC 4370 proxied authorization.
    AuthorizationDenied,
}

impl ResultCode {
    /// Every result code, for tables and tests.
    pub const ALL: [ResultCode; 45] = [
        ResultCode::Success,
        ResultCode::OperationsError,
        ResultCode::ProtocolError,
        ResultCode::TimeLimitExceeded,
        ResultCode::SizeLimitExceeded,
        ResultCode::CompareFalse,
        ResultCode::CompareTrue,
        ResultCode::AuthMethodNotSupported,
        ResultCode::StrongerAuthRequired,
        ResultCode::Referral,
        ResultCode::AdminLimitExceeded,
        ResultCode::UnavailableCriticalExtension,
        ResultCode::ConfidentialityRequired,
        ResultCode::SaslBindInProgress,
        ResultCode::NoSuchAttribute,
        ResultCode::UndefinedAttributeType,
        ResultCode::InappropriateMatching,
        ResultCode::ConstraintViolation,
        ResultCode::AttributeOrValueExists,
        ResultCode::InvalidAttributeSyntax,
        ResultCode::NoSuchObject,
        ResultCode::AliasProblem,
        ResultCode::InvalidDnSyntax,
        ResultCode::AliasDereferencingProblem,
        ResultCode::InappropriateAuthentication,
        ResultCode::InvalidCredentials,
        ResultCode::InsufficientAccessRights,
        ResultCode::Busy,
        ResultCode::Unavailable,
        ResultCode::UnwillingToPerform,
        ResultCode::LoopDetect,
        ResultCode::NamingViolation,
        ResultCode::ObjectClassViolation,
        ResultCode::NotAllowedOnNonLeaf,
        ResultCode::NotAllowedOnRdn,
        ResultCode::EntryAlreadyExists,
        ResultCode::ObjectClassModsProhibited,
        ResultCode::AffectsMultipleDsas,
        ResultCode::Other,
        ResultCode::Canceled,
        ResultCode::NoSuchOperation,
        ResultCode::TooLate,
        ResultCode::CannotCancel,
        ResultCode::AssertionFailed,
        ResultCode::AuthorizationDenied,
    ];

    /// The protocol number sent in LDAPResult.resultCode.
    pub fn code(self) -> u32 {
        match self {
            ResultCode::Success => 0,
            ResultCode::OperationsError => 1,
            ResultCode::ProtocolError => 2,
            ResultCode::TimeLimitExceeded => 3,
            ResultCode::SizeLimitExceeded => 4,
            ResultCode::CompareFalse => 5,
            ResultCode::CompareTrue => 6,
            ResultCode::AuthMethodNotSupported => 7,
            ResultCode::StrongerAuthRequired => 8,
            ResultCode::Referral => 10,
            ResultCode::AdminLimitExceeded => 11,
            ResultCode::UnavailableCriticalExtension => 12,
            ResultCode::ConfidentialityRequired => 13,
            ResultCode::SaslBindInProgress => 14,
            ResultCode::NoSuchAttribute => 16,
            ResultCode::UndefinedAttributeType => 17,
            ResultCode::InappropriateMatching => 18,
            ResultCode::ConstraintViolation => 19,
            ResultCode::AttributeOrValueExists => 20,
            ResultCode::InvalidAttributeSyntax => 21,
            ResultCode::NoSuchObject => 32,
            ResultCode::AliasProblem => 33,
            ResultCode::InvalidDnSyntax => 34,
            ResultCode::AliasDereferencingProblem => 36,
            ResultCode::InappropriateAuthentication => 48,
            ResultCode::InvalidCredentials => 49,
            ResultCode::InsufficientAccessRights => 50,
            ResultCode::Busy => 51,
            ResultCode::Unavailable => 52,
            ResultCode::UnwillingToPerform => 53,
            ResultCode::LoopDetect => 54,
            ResultCode::NamingViolation => 64,
            ResultCode::ObjectClassViolation => 65,
            ResultCode::NotAllowedOnNonLeaf => 66,
            ResultCode::NotAllowedOnRdn => 67,
            ResultCode::EntryAlreadyExists => 68,
            ResultCode::ObjectClassModsProhibited => 69,
            ResultCode::AffectsMultipleDsas => 71,
            ResultCode::Other => 80,
            ResultCode::Canceled => 118,
            ResultCode::NoSuchOperation => 119,
            ResultCode::TooLate => 120,
            ResultCode::CannotCancel => 121,
            ResultCode::AssertionFailed => 122,
            ResultCode::AuthorizationDenied => 123,
        }
    }

    /// The code for a protocol number, if it is one lmdir knows.
    pub fn from_code(code: u32) -> Option<ResultCode> {
        ResultCode::ALL
            .iter()
            .copied()
            .find(|candidate| candidate.code() == code)
    }

    /// The RFC 4511 name (`noSuchObject`).
    pub fn name(self) -> &'static str {
        match self {
            ResultCode::Success => "success",
            ResultCode::OperationsError => "operationsError",
            ResultCode::ProtocolError => "protocolError",
            ResultCode::TimeLimitExceeded => "timeLimitExceeded",
            ResultCode::SizeLimitExceeded => "sizeLimitExceeded",
            ResultCode::CompareFalse => "compareFalse",
            ResultCode::CompareTrue => "compareTrue",
            ResultCode::AuthMethodNotSupported => "authMethodNotSupported",
            ResultCode::StrongerAuthRequired => "strongerAuthRequired",
            ResultCode::Referral => "referral",
            ResultCode::AdminLimitExceeded => "adminLimitExceeded",
            ResultCode::UnavailableCriticalExtension => "unavailableCriticalExtension",
            ResultCode::ConfidentialityRequired => "confidentialityRequired",
            ResultCode::SaslBindInProgress => "saslBindInProgress",
            ResultCode::NoSuchAttribute => "noSuchAttribute",
            ResultCode::UndefinedAttributeType => "undefinedAttributeType",
            ResultCode::InappropriateMatching => "inappropriateMatching",
            ResultCode::ConstraintViolation => "constraintViolation",
            ResultCode::AttributeOrValueExists => "attributeOrValueExists",
            ResultCode::InvalidAttributeSyntax => "invalidAttributeSyntax",
            ResultCode::NoSuchObject => "noSuchObject",
            ResultCode::AliasProblem => "aliasProblem",
            ResultCode::InvalidDnSyntax => "invalidDNSyntax",
            ResultCode::AliasDereferencingProblem => "aliasDereferencingProblem",
            ResultCode::InappropriateAuthentication => "inappropriateAuthentication",
            ResultCode::InvalidCredentials => "invalidCredentials",
            ResultCode::InsufficientAccessRights => "insufficientAccessRights",
            ResultCode::Busy => "busy",
            ResultCode::Unavailable => "unavailable",
            ResultCode::UnwillingToPerform => "unwillingToPerform",
            ResultCode::LoopDetect => "loopDetect",
            ResultCode::NamingViolation => "namingViolation",
            ResultCode::ObjectClassViolation => "objectClassViolation",
            ResultCode::NotAllowedOnNonLeaf => "notAllowedOnNonLeaf",
            ResultCode::NotAllowedOnRdn => "notAllowedOnRDN",
            ResultCode::EntryAlreadyExists => "entryAlreadyExists",
            ResultCode::ObjectClassModsProhibited => "objectClassModsProhibited",
            ResultCode::AffectsMultipleDsas => "affectsMultipleDSAs",
            ResultCode::Other => "other",
            ResultCode::Canceled => "canceled",
            ResultCode::NoSuchOperation => "noSuchOperation",
            ResultCode::TooLate => "tooLate",
            ResultCode::CannotCancel => "cannotCancel",
            ResultCode::AssertionFailed => "assertionFailed",
            ResultCode::AuthorizationDenied => "authorizationDenied",
        }
    }
}

impl fmt::Display for ResultCode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} ({})", self.name(), self.code())
    }
}

/// An LDAP operation failure: the result code, the diagnostic message sent to the client and,
/// for noSuchObject-like errors, the deepest existing ancestor DN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapError {
    pub code: ResultCode,
    pub message: String,
    pub matched_dn: Option<String>,
}

impl LdapError {
    pub fn new(code: ResultCode, message: impl Into<String>) -> LdapError {
        LdapError {
            code,
            message: message.into(),
            matched_dn: None,
        }
    }

    /// The same error with `matched_dn` set.
    pub fn with_matched_dn(mut self, matched_dn: impl Into<String>) -> LdapError {
        self.matched_dn = Some(matched_dn.into());
        self
    }

    pub(crate) fn invalid_syntax(message: impl Into<String>) -> LdapError {
        LdapError::new(ResultCode::InvalidAttributeSyntax, message)
    }

    pub(crate) fn invalid_dn(message: impl Into<String>) -> LdapError {
        LdapError::new(ResultCode::InvalidDnSyntax, message)
    }
}

impl fmt::Display for LdapError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.code, self.message)?;
        if let Some(matched_dn) = &self.matched_dn {
            write!(formatter, " (matched DN '{matched_dn}')")?;
        }
        Ok(())
    }
}

impl std::error::Error for LdapError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_code_numbers_match_rfc_4511() {
        assert_eq!(ResultCode::Success.code(), 0);
        assert_eq!(ResultCode::SizeLimitExceeded.code(), 4);
        assert_eq!(ResultCode::AdminLimitExceeded.code(), 11);
        assert_eq!(ResultCode::NoSuchAttribute.code(), 16);
        assert_eq!(ResultCode::UndefinedAttributeType.code(), 17);
        assert_eq!(ResultCode::ConstraintViolation.code(), 19);
        assert_eq!(ResultCode::AttributeOrValueExists.code(), 20);
        assert_eq!(ResultCode::InvalidAttributeSyntax.code(), 21);
        assert_eq!(ResultCode::NoSuchObject.code(), 32);
        assert_eq!(ResultCode::InvalidDnSyntax.code(), 34);
        assert_eq!(ResultCode::InsufficientAccessRights.code(), 50);
        assert_eq!(ResultCode::NamingViolation.code(), 64);
        assert_eq!(ResultCode::ObjectClassViolation.code(), 65);
        assert_eq!(ResultCode::NotAllowedOnNonLeaf.code(), 66);
        assert_eq!(ResultCode::EntryAlreadyExists.code(), 68);
        assert_eq!(ResultCode::Other.code(), 80);
    }

    #[test]
    fn result_codes_are_distinct_and_round_trip() {
        for code in ResultCode::ALL {
            assert_eq!(ResultCode::from_code(code.code()), Some(code));
        }
        assert_eq!(ResultCode::from_code(9), None);
    }
}
