/* common/xml.h - XML output escaping (parsing uses expat where it is needed).
 */
#ifndef COMMON_XML_H
#define COMMON_XML_H
#include "common/buf.h"
#include "common/compiler.h"
#include <stddef.h>

/* Appends @s with & < > " ' escaped, and control bytes other than tab, LF
 * and CR written as numeric references (&#x1;) so S3 keys with any byte stay
 * well-formed-ish for clients that accept XML 1.1 references. A byte that
 * does not start well-formed UTF-8 becomes U+FFFD, so the document stays
 * well-formed whatever the input. */
CM_MUST_CHECK int cm_xml_escape(struct cm_buf *out, const char *s, size_t n);

#endif /* COMMON_XML_H */
