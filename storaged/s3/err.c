/* storaged/s3/err.c - S3 error table and the errno -> S3 error mapping.
 * The codes and statuses are what AWS S3 returns and what clients test
 * (shared/research/store-anchors.md section 8). */
#include "storaged/s3/err.h"

#include "storaged/store/object.h"
#include <errno.h>

static const struct stor_s3_err_info s3_errs[S3E_COUNT] = {
    [S3E_NONE] = {200, "OK", "OK"},
    [S3E_ACCESS_DENIED] = {403, "AccessDenied", "Access Denied."},
    [S3E_BAD_DIGEST] =
        {400, "BadDigest",
         "The Content-MD5 you specified did not match what we received."},
    [S3E_BUCKET_EXISTS] =
        {409, "BucketAlreadyOwnedByYou",
         "Your previous request to create the named bucket succeeded and you already own it."},
    [S3E_BUCKET_TAKEN] =
        {409, "BucketAlreadyExists",
         "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again."},
    [S3E_ILLEGAL_LOCATION] =
        {400, "IllegalLocationConstraintException",
         "The location constraint is incompatible for the region specific endpoint this request was sent to."},
    [S3E_INVALID_LOCATION] =
        {400, "InvalidLocationConstraint",
         "The specified location-constraint is not valid."},
    [S3E_BUCKET_NOT_EMPTY] = {409, "BucketNotEmpty",
                              "The bucket you tried to delete is not empty."},
    [S3E_ENTITY_TOO_LARGE] =
        {400, "EntityTooLarge",
         "Your proposed upload exceeds the maximum allowed object size."},
    [S3E_ENTITY_TOO_SMALL] =
        {400, "EntityTooSmall",
         "Your proposed upload is smaller than the minimum allowed object size."},
    [S3E_INCOMPLETE_BODY] =
        {400, "IncompleteBody",
         "You did not provide the number of bytes specified by the Content-Length HTTP header."},
    [S3E_INTERNAL] = {500, "InternalError",
                      "We encountered an internal error. Please try again."},
    [S3E_INVALID_ACCESS_KEY] =
        {403, "InvalidAccessKeyId",
         "The AWS Access Key Id you provided does not exist in our records."},
    [S3E_INVALID_ARGUMENT] = {400, "InvalidArgument", "Invalid Argument."},
    [S3E_INVALID_BUCKET_NAME] = {400, "InvalidBucketName",
                                 "The specified bucket is not valid."},
    [S3E_INVALID_DIGEST] = {400, "InvalidDigest",
                            "The Content-MD5 you specified is not valid."},
    [S3E_INVALID_PART] =
        {400, "InvalidPart",
         "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag."},
    [S3E_INVALID_PART_ORDER] =
        {400, "InvalidPartOrder",
         "The list of parts was not in ascending order. Parts must be ordered by part number."},
    [S3E_INVALID_RANGE] = {416, "InvalidRange",
                           "The requested range is not satisfiable."},
    [S3E_INVALID_REQUEST] = {400, "InvalidRequest", "Invalid Request."},
    [S3E_KEY_TOO_LONG] = {400, "KeyTooLongError", "Your key is too long."},
    [S3E_MALFORMED_XML] =
        {400, "MalformedXML",
         "The XML you provided was not well-formed or did not validate against our published schema."},
    [S3E_METHOD_NOT_ALLOWED] =
        {405, "MethodNotAllowed",
         "The specified method is not allowed against this resource."},
    [S3E_MISSING_CONTENT_LENGTH] =
        {411, "MissingContentLength",
         "You must provide the Content-Length HTTP header."},
    [S3E_NO_SUCH_BUCKET] = {404, "NoSuchBucket",
                            "The specified bucket does not exist."},
    [S3E_NO_SUCH_KEY] = {404, "NoSuchKey", "The specified key does not exist."},
    [S3E_NO_SUCH_VERSION] = {404, "NoSuchVersion",
                             "The specified version does not exist."},
    [S3E_NO_SUCH_UPLOAD] =
        {404, "NoSuchUpload",
         "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."},
    [S3E_NOT_IMPLEMENTED] =
        {501, "NotImplemented",
         "A header or query you provided implies functionality that is not implemented."},
    [S3E_PRECONDITION_FAILED] =
        {412, "PreconditionFailed",
         "At least one of the pre-conditions you specified did not hold."},
    [S3E_NOT_MODIFIED] = {304, "NotModified", "Not Modified."},
    [S3E_REQUEST_TIMEOUT] =
        {400, "RequestTimeout",
         "Your socket connection to the server was not read from or written to within the timeout period."},
    [S3E_SKEWED] =
        {403, "RequestTimeTooSkewed",
         "The difference between the request time and the server's time is too large."},
    [S3E_SIGNATURE_MISMATCH] =
        {403, "SignatureDoesNotMatch",
         "The request signature we calculated does not match the signature you provided. Check your key and signing method."},
    [S3E_SHA256_MISMATCH] =
        {400, "XAmzContentSHA256Mismatch",
         "The provided 'x-amz-content-sha256' header does not match what was computed."},
    [S3E_BAD_REQUEST] = {400, "BadRequest", "Malformed HTTP request."},
    [S3E_HEADER_TOO_LARGE] =
        {400, "RequestHeaderSectionTooLarge",
         "Your request header section exceeds the maximum allowed size."},
    [S3E_SLOW_DOWN] = {503, "SlowDown", "Please reduce your request rate."},
    [S3E_SERVICE_UNAVAILABLE] =
        {503, "ServiceUnavailable",
         "Too few drives are online to serve this request."},
    [S3E_INDEX_REBUILDING] =
        {503, "ServiceUnavailable",
         "The object index is being rebuilt from the drives; retry later (see /metrics storaged_index_*)."},
    [S3E_EXPIRED_PRESIGN] = {403, "AccessDenied", "Request has expired"},
    [S3E_AUTH_QUERY_INVALID] =
        {400, "AuthorizationQueryParametersError",
         "Error parsing the X-Amz-Credential or other presigned parameters."},
    [S3E_CHECKSUM_MISMATCH] =
        {400, "BadDigest",
         "The checksum you specified did not match what we received."},
    [S3E_INVALID_CHUNK] =
        {400, "IncompleteBody",
         "The aws-chunked body is malformed or a chunk signature does not match."},
    [S3E_NO_SUCH_BUCKET_POLICY] = {404, "NoSuchBucketPolicy",
                                   "The bucket policy does not exist."},
    [S3E_NO_SUCH_PAB] = {404, "NoSuchPublicAccessBlockConfiguration",
                         "The public access block configuration was not "
                         "found."},
    [S3E_NO_SUCH_OWNERSHIP] = {404, "OwnershipControlsNotFoundError",
                               "The bucket ownership controls were not "
                               "found"},
    [S3E_ACL_NOT_SUPPORTED] = {400, "AccessControlListNotSupported",
                               "The bucket does not allow ACLs"},
    [S3E_OWNERSHIP_WITH_ACL] = {400, "InvalidBucketAclWithObjectOwnership",
                                "Bucket cannot have ACLs set with "
                                "ObjectOwnership's BucketOwnerEnforced "
                                "setting"},
    [S3E_NO_SUCH_LIFECYCLE] = {404, "NoSuchLifecycleConfiguration",
                               "The lifecycle configuration does not exist."},
    [S3E_INVALID_VERSION_ID] = {400, "InvalidArgument",
                                "Invalid version id specified"},
    [S3E_TRANSITION_NOT_IMPLEMENTED] =
        {501, "NotImplemented",
         "Lifecycle transitions are not implemented: storaged has one storage class."},
    [S3E_POST_MALFORMED] =
        {400, "MalformedPOSTRequest",
         "The body of your POST request is not well-formed multipart/form-data."},
    [S3E_POST_BAD_POLICY] = {400, "InvalidPolicyDocument",
                             "Invalid Policy: the policy is not a valid POST "
                             "policy document."},
    [S3E_POST_FIELDS_TOO_LARGE] =
        {400, "MaxPostPreDataLengthExceeded",
         "Your POST request fields preceding the upload file were too large."},
    [S3E_POST_NO_FILE] = {400, "InvalidArgument",
                          "POST requires exactly one file upload per request."},
    [S3E_SIGV2_UNSUPPORTED] =
        {400, "InvalidRequest",
         "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256."},
    [S3E_SIGV2_BAD_HEADER] =
        {400, "InvalidArgument",
         "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature"},
    [S3E_SIGV2_BAD_DATE] =
        {403, "AccessDenied",
         "AWS authentication requires a valid Date or x-amz-date header"},
    [S3E_SIGV2_QUERY_INCOMPLETE] =
        {403, "AccessDenied",
         "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters"},
    [S3E_COPY_SOURCE_TOO_LARGE] =
        {400, "InvalidRequest",
         "The specified copy source is larger than the maximum allowable size for a copy source: 5368709120"},
    [S3E_INVALID_PART_NUMBER] = {416, "InvalidPartNumber",
                                 "The requested partnumber is not satisfiable"},
    [S3E_PART_AND_RANGE] =
        {400, "InvalidRequest",
         "Cannot specify both Range header and partNumber query parameter."},
    [S3E_COPY_TO_SELF] =
        {400, "InvalidRequest",
         "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."},
    [S3E_MULTIPLE_CHECKSUMS] =
        {400, "InvalidRequest",
         "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."},
    [S3E_INVALID_CHECKSUM] = {400, "InvalidRequest",
                              "Value for x-amz-checksum- header is invalid."},
    [S3E_MALFORMED_POLICY] = {400, "MalformedPolicy",
                              "The policy is malformed."},
    [S3E_NO_SUCH_USER] = {404, "NoSuchUser",
                          "The specified user does not exist."},
    [S3E_USER_EXISTS] = {409, "UserAlreadyExists",
                         "A user with this name already exists."},
    [S3E_ADMIN_BAD_CALL] = {400, "InvalidRequest", "Unknown admin API call."},
    [S3E_TAGGING_HEADER] =
        {400, "InvalidArgument",
         "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates."},
    [S3E_TOO_MANY_TAGS] = {400, "BadRequest",
                           "Object tags cannot be greater than 10"},
    [S3E_INVALID_TAG] = {400, "InvalidTag",
                         "The TagKey or TagValue you have provided is invalid"},
    [S3E_INVALID_URI] = {400, "InvalidURI",
                         "Couldn't parse the specified URI."},
    [S3E_SSE_NOT_IMPLEMENTED] =
        {501, "NotImplemented",
         "Server-side encryption (x-amz-server-side-encryption*) is not implemented by this server; nothing was stored."},
    [S3E_SSE_NOT_APPLICABLE] =
        {400, "InvalidRequest",
         "The encryption parameters are not applicable to this object."},
    [S3E_SSE_HDR_UNSUPPORTED] =
        {400, "InvalidArgument",
         "x-amz-server-side-encryption header is not supported for this operation."},
    [S3E_SSE_KMS_NOT_IMPLEMENTED] =
        {501, "NotImplemented",
         "SSE-KMS (aws:kms) is not implemented by this server; nothing was stored. Use AES256 (SSE-S3) or SSE-C."},
    [S3E_SSE_MPU_NOT_IMPLEMENTED] =
        {501, "NotImplemented",
         "Server-side encryption of multipart uploads (asked for, or the bucket's default) is not implemented by this server; nothing was stored."},
    [S3E_SSE_BAD_ALGORITHM] =
        {400, "InvalidArgument",
         "The encryption method specified is not supported."},
    [S3E_SSE_BAD_KEY] =
        {400, "InvalidArgument",
         "The secret key was invalid for the specified algorithm (SSE-C needs the algorithm AES256, a base64 256-bit key and its base64 MD5)."},
    [S3E_SSE_BAD_KEY_MD5] =
        {400, "InvalidArgument",
         "The calculated MD5 hash of the key did not match the hash that was provided."},
    [S3E_SSE_KEY_REQUIRED] =
        {400, "InvalidRequest",
         "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object."},
    [S3E_SSE_KEY_MISMATCH] =
        {400, "InvalidRequest",
         "The provided encryption parameters did not match the ones used originally."},
    [S3E_SSE_OLD_LAYOUT] =
        {500, "InternalError",
         "The object was encrypted in an older storaged layout (v1) whose end is not authenticated, so a truncation could not be detected; storaged refuses to read it. Upload it again."},
    [S3E_SSE_DAMAGED] =
        {500, "InternalError",
         "The encrypted object fails authentication: its stored bytes were altered or cut short."},
    [S3E_NO_SSE_CONFIG] =
        {404, "ServerSideEncryptionConfigurationNotFoundError",
         "The server side encryption configuration was not found."},
    [S3E_NO_SUCH_TAG_SET] = {404, "NoSuchTagSet", "The TagSet does not exist."},
    [S3E_NO_SUCH_CORS] = {404, "NoSuchCORSConfiguration",
                          "The CORS configuration does not exist."},
    [S3E_CORS_BAD_METHOD] =
        {400, "InvalidRequest",
         "Found unsupported HTTP method in CORS config (GET, PUT, POST, DELETE and HEAD are)."},
    [S3E_CORS_BAD_ORIGIN] =
        {400, "InvalidRequest",
         "AllowedOrigin can not have more than one wildcard."},
    [S3E_CORS_FORBIDDEN] =
        {403, "AccessForbidden",
         "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."},
    [S3E_INVALID_STORAGE_CLASS] =
        {400, "InvalidStorageClass",
         "The storage class you specified is not valid."},
    [S3E_STORAGE_CLASS_NOT_IMPLEMENTED] =
        {501, "NotImplemented",
         "Only the STANDARD storage class is implemented by this server; nothing was stored."},
    [S3E_NO_OBJECT_LOCK] = {400, "InvalidRequest",
                            "Bucket is missing Object Lock Configuration"},
    [S3E_OBJECT_LOCK_NOT_IMPLEMENTED] =
        {501, "NotImplemented",
         "Object Lock is not implemented by this server; the bucket was not created."},
    [S3E_APPEND_NOT_IMPLEMENTED] =
        {501, "NotImplemented",
         "Appends (x-amz-write-offset-bytes) are not implemented by this server; nothing was stored."},
    [S3E_CORS_NO_ORIGIN] =
        {400, "BadRequest",
         "Insufficient information. Origin request header needed."},
    [S3E_CORS_NO_METHOD] = {400, "BadRequest",
                            "Invalid Access-Control-Request-Method: null"},
    [S3E_MALFORMED_ACL] =
        {400, "MalformedACLError",
         "The XML you provided was not well-formed or did not validate against our published schema."},
    [S3E_UNRESOLVABLE_EMAIL] =
        {400, "UnresolvableGrantByEmailAddress",
         "The e-mail address you provided does not match any account on record."},
    [S3E_UNEXPECTED_CONTENT] = {400, "UnexpectedContent",
                                "This request does not support content."},
    [S3E_CORS_NOT_ENABLED] =
        {403, "AccessForbidden",
         "CORSResponse: CORS is not enabled for this bucket."},
};

/* See header. */
const struct stor_s3_err_info *stor_s3_err_info(enum stor_s3_err e)
{
    if ((int)e < 0 || e >= S3E_COUNT || s3_errs[e].code == NULL)
        return &s3_errs[S3E_INTERNAL];
    return &s3_errs[e];
}

/* See header. */
enum stor_s3_err stor_s3_err_from_errno(int err)
{
    switch (-err) {
    case 0:
        return S3E_NONE;
    case STOR_ENOKEY:
        return S3E_NO_SUCH_KEY;
    case STOR_ENOBUCKET:
        return S3E_NO_SUCH_BUCKET;
    case STOR_EBUCKETEXISTS:
        return S3E_BUCKET_EXISTS;
    case STOR_ENOTEMPTY:
        return S3E_BUCKET_NOT_EMPTY;
    case STOR_ENOUPLOAD:
        return S3E_NO_SUCH_UPLOAD;
    case STOR_EBADPART:
        return S3E_INVALID_PART;
    case STOR_EPARTORDER:
        return S3E_INVALID_PART_ORDER;
    case STOR_ETOOSMALL:
        return S3E_ENTITY_TOO_SMALL;
    case STOR_EBADDIGEST:
        return S3E_BAD_DIGEST;
    case STOR_EQUORUM:
        return S3E_SERVICE_UNAVAILABLE;
    case STOR_EINVAL:
        return S3E_INVALID_ARGUMENT;
    case STOR_EPRECOND:
        return S3E_PRECONDITION_FAILED;
    case ENAMETOOLONG:
        return S3E_KEY_TOO_LONG;
    case EFBIG:
        return S3E_ENTITY_TOO_LARGE;
    default:
        return S3E_INTERNAL;
    }
}
