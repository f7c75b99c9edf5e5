/* storaged/s3/err.h - the S3 error vocabulary: one enum, one table mapping
 * each error to its HTTP status, XML Code and message. Errors travel as
 * enum values and become status + XML only at the reply boundary. */
#ifndef STORAGED_S3_ERR_H
#define STORAGED_S3_ERR_H

enum stor_s3_err {
    S3E_NONE = 0,
    S3E_ACCESS_DENIED,
    S3E_BAD_DIGEST,
    S3E_BUCKET_EXISTS,
    S3E_BUCKET_TAKEN,     /* 409 BucketAlreadyExists: another account's */
    S3E_ILLEGAL_LOCATION, /* 400: LocationConstraint not the server's region */
    S3E_INVALID_LOCATION, /* 400: LocationConstraint us-east-1 given */
    S3E_BUCKET_NOT_EMPTY,
    S3E_ENTITY_TOO_LARGE,
    S3E_ENTITY_TOO_SMALL,
    S3E_INCOMPLETE_BODY,
    S3E_INTERNAL,
    S3E_INVALID_ACCESS_KEY,
    S3E_INVALID_ARGUMENT,
    S3E_INVALID_BUCKET_NAME,
    S3E_INVALID_DIGEST,
    S3E_INVALID_PART,
    S3E_INVALID_PART_ORDER,
    S3E_INVALID_RANGE,
    S3E_INVALID_REQUEST,
    S3E_KEY_TOO_LONG,
    S3E_MALFORMED_XML,
    S3E_METHOD_NOT_ALLOWED,
    S3E_MISSING_CONTENT_LENGTH,
    S3E_NO_SUCH_BUCKET,
    S3E_NO_SUCH_KEY,
    S3E_NO_SUCH_UPLOAD,
    S3E_NO_SUCH_VERSION,
    S3E_NOT_IMPLEMENTED,
    S3E_PRECONDITION_FAILED,
    S3E_NOT_MODIFIED, /* 304, not an error body */
    S3E_REQUEST_TIMEOUT,
    S3E_SKEWED,
    S3E_SIGNATURE_MISMATCH,
    S3E_SHA256_MISMATCH,
    S3E_BAD_REQUEST,      /* malformed HTTP */
    S3E_HEADER_TOO_LARGE, /* head over the limits */
    S3E_SLOW_DOWN,
    S3E_SERVICE_UNAVAILABLE,
    S3E_EXPIRED_PRESIGN,
    S3E_AUTH_QUERY_INVALID,
    S3E_CHECKSUM_MISMATCH,
    S3E_INVALID_CHUNK,
    S3E_NO_SUCH_BUCKET_POLICY,
    S3E_NO_SUCH_PAB,             /* 404 NoSuchPublicAccessBlockConfiguration */
    S3E_SIGV2_UNSUPPORTED,       /* InvalidRequest: use AWS4-HMAC-SHA256 */
    S3E_SIGV2_BAD_HEADER,        /* InvalidArgument: not "AWS AKID:sig" */
    S3E_SIGV2_BAD_DATE,          /* 403 AccessDenied: no valid date */
    S3E_SIGV2_QUERY_INCOMPLETE,  /* 403 AccessDenied: a SigV2 URL's params */
    S3E_COPY_SOURCE_TOO_LARGE,   /* InvalidRequest: copy source > 5 GiB */
    S3E_INVALID_PART_NUMBER,     /* 416: ?partNumber= past the last part */
    S3E_PART_AND_RANGE,          /* InvalidRequest: partNumber with Range */
    S3E_COPY_TO_SELF,            /* InvalidRequest: copy onto itself, COPY */
    S3E_MULTIPLE_CHECKSUMS,      /* InvalidRequest: two x-amz-checksum-* */
    S3E_INVALID_CHECKSUM,        /* InvalidRequest: checksum value malformed */
    S3E_TAGGING_HEADER,          /* InvalidArgument: x-amz-tagging malformed */
    S3E_TOO_MANY_TAGS,           /* BadRequest: more than 10 object tags */
    S3E_INVALID_TAG,             /* InvalidTag: a tag key or value */
    S3E_INVALID_URI,             /* InvalidURI: a key not valid UTF-8 */
    S3E_SSE_NOT_IMPLEMENTED,     /* 501: x-amz-server-side-encryption* */
    S3E_SSE_NOT_APPLICABLE,      /* InvalidRequest: SSE-C key, plain object */
    S3E_SSE_HDR_UNSUPPORTED,     /* InvalidArgument: SSE header on a read */
    S3E_SSE_KMS_NOT_IMPLEMENTED, /* 501: aws:kms */
    S3E_SSE_MPU_NOT_IMPLEMENTED, /* 501: an encrypted multipart upload */
    S3E_SSE_BAD_ALGORITHM,       /* InvalidArgument: not AES256 */
    S3E_SSE_BAD_KEY,             /* InvalidArgument: SSE-C key unusable */
    S3E_SSE_BAD_KEY_MD5,         /* InvalidArgument: key MD5 differs */
    S3E_SSE_KEY_REQUIRED,        /* InvalidRequest: SSE-C object, no key */
    S3E_SSE_KEY_MISMATCH,        /* InvalidRequest: another key */
    S3E_SSE_OLD_LAYOUT,          /* 500: encrypted in layout v1, refused */
    S3E_SSE_DAMAGED,             /* 500: a package fails its tag */
    S3E_NO_SSE_CONFIG,
    S3E_NO_SUCH_TAG_SET,       /* 404: no bucket tags */
    S3E_NO_SUCH_CORS,          /* 404: no CORS configuration */
    S3E_CORS_BAD_METHOD,       /* InvalidRequest: a method CORS cannot allow */
    S3E_CORS_BAD_ORIGIN,       /* InvalidRequest: two '*' in an origin */
    S3E_CORS_FORBIDDEN,        /* 403: a preflight no rule allows */
    /* 404: no bucket tags */  /* 404: no bucket encryption */
    S3E_INVALID_STORAGE_CLASS, /* InvalidStorageClass: unknown class */
    S3E_STORAGE_CLASS_NOT_IMPLEMENTED, /* 501: a class other than STANDARD */
    S3E_NO_OBJECT_LOCK,                /* InvalidRequest: object-lock headers */
    S3E_OBJECT_LOCK_NOT_IMPLEMENTED,   /* 501: CreateBucket with object lock */
    S3E_APPEND_NOT_IMPLEMENTED,        /* 501: x-amz-write-offset-bytes */
    S3E_CORS_NO_ORIGIN,                /* BadRequest: OPTIONS without Origin */
    S3E_CORS_NO_METHOD,                /* BadRequest: ... nor its method */
    S3E_CORS_NOT_ENABLED,              /* 403: OPTIONS, no CORS configuration */
    S3E_INDEX_REBUILDING,   /* 503 ServiceUnavailable: index rebuild */
    S3E_MALFORMED_POLICY,   /* 400: a policy that does not compile */
    S3E_NO_SUCH_USER,       /* 404: admin API, unknown user */
    S3E_USER_EXISTS,        /* 409: admin API, the name is taken */
    S3E_ADMIN_BAD_CALL,     /* 400 InvalidRequest: unknown admin call */
    S3E_NO_SUCH_LIFECYCLE,  /* 404 NoSuchLifecycleConfiguration */
    S3E_INVALID_VERSION_ID, /* 400 InvalidArgument: a malformed versionId */
    S3E_TRANSITION_NOT_IMPLEMENTED, /* 501: lifecycle Transitions */
    S3E_POST_MALFORMED,             /* 400 MalformedPOSTRequest (post.c) */
    S3E_POST_BAD_POLICY,            /* 400 InvalidPolicyDocument */
    S3E_POST_FIELDS_TOO_LARGE,      /* 400 MaxPostPreDataLengthExceeded */
    S3E_POST_NO_FILE,               /* 400 InvalidArgument: no file field */
    S3E_MALFORMED_ACL,              /* 400 MalformedACLError (acl.c) */
    S3E_UNRESOLVABLE_EMAIL,         /* 400 UnresolvableGrantByEmailAddress */
    S3E_UNEXPECTED_CONTENT,         /* 400: an ACL body with ACL headers */
    S3E_NO_SUCH_OWNERSHIP,          /* 404 OwnershipControlsNotFoundError */
    S3E_ACL_NOT_SUPPORTED,          /* 400 AccessControlListNotSupported */
    S3E_OWNERSHIP_WITH_ACL, /* 400 InvalidBucketAclWithObjectOwnership */
    S3E_COUNT
};

struct stor_s3_err_info {
    int status;
    const char *code;
    const char *message;
};

/* The table entry for @e (S3E_INTERNAL for out-of-range values). */
const struct stor_s3_err_info *stor_s3_err_info(enum stor_s3_err e);
/* Maps an object-layer error @err (a negative errno, STOR_E* in object.h)
 * to an S3 error: STOR_ENOKEY is NoSuchKey, STOR_ENOBUCKET NoSuchBucket,
 * anything unknown InternalError. */
enum stor_s3_err stor_s3_err_from_errno(int err);

#endif /* STORAGED_S3_ERR_H */
