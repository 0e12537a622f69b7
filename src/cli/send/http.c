/*
 * http.c — posting OTLP requests with libcurl (sender.h): TLS against the
 * system's CA store or --send-ca, headers, gzip, a timeout per request,
 * proxies from the usual variables (http_proxy, https_proxy, no_proxy:
 * libcurl reads them), one connection kept between requests.
 *
 * libcurl is the system's (libcurl.so.4), loaded when the first sender
 * starts, not linked: linked, the wheel (docs/install.md) would carry it
 * and the thirty libraries it brings (two TLS stacks, Kerberos, LDAP,
 * SASL, ...), whose configuration (CA store, crypto policies) is the
 * system's anyway; and every strata command would load them to run.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <zlib.h>

#include "sender.h"

/* The libcurl functions used: the ABI of libcurl.so.4, stable since 7.16. */
static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	void (*easy_cleanup)(CURL *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
} C;

/* Loads libcurl and starts it, once; -1 with err set if it cannot be. */
static int curl_load(char *err, size_t errlen)
{
	static int state; /* 0 not tried, 1 ready, -1 failed */
	static char why[512];
	if (!state) {
		void *l = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
		state = -1;
		if (!l) {
			snprintf(why, sizeof(why), "sending needs libcurl (libcurl.so.4), which is not installed: "
				 "install libcurl4 (Debian, Ubuntu) or libcurl (Fedora)");
		} else {
			*(void **)&C.global_init = dlsym(l, "curl_global_init");
			*(void **)&C.easy_init = dlsym(l, "curl_easy_init");
			*(void **)&C.easy_setopt = dlsym(l, "curl_easy_setopt");
			*(void **)&C.easy_perform = dlsym(l, "curl_easy_perform");
			*(void **)&C.easy_getinfo = dlsym(l, "curl_easy_getinfo");
			*(void **)&C.easy_strerror = dlsym(l, "curl_easy_strerror");
			*(void **)&C.easy_cleanup = dlsym(l, "curl_easy_cleanup");
			*(void **)&C.slist_append = dlsym(l, "curl_slist_append");
			*(void **)&C.slist_free_all = dlsym(l, "curl_slist_free_all");
			if (!C.global_init || !C.easy_init || !C.easy_setopt || !C.easy_perform || !C.easy_getinfo ||
			    !C.easy_strerror || !C.easy_cleanup || !C.slist_append || !C.slist_free_all)
				snprintf(why, sizeof(why), "libcurl.so.4 lacks a function strata uses");
			else if (C.global_init(CURL_GLOBAL_DEFAULT))
				snprintf(why, sizeof(why), "libcurl would not start");
			else
				state = 1;
		}
	}
	if (state < 0)
		snprintf(err, errlen, "%s", why);
	return state > 0 ? 0 : -1;
}

struct http {
	CURL *curl;
	struct curl_slist *headers;
	const struct send_cfg *cfg;
	char resp[4096];
	size_t resp_len;
};

static size_t on_body(char *d, size_t sz, size_t nm, void *ctx)
{
	struct http *h = ctx;
	size_t n = sz * nm, room = sizeof(h->resp) - 1 - h->resp_len;
	memcpy(h->resp + h->resp_len, d, n < room ? n : room);
	h->resp_len += n < room ? n : room;
	return n;
}

struct http *http_new(const struct send_cfg *c, char *err, size_t errlen)
{
	if (curl_load(err, errlen))
		return NULL;
	struct http *h = calloc(1, sizeof(*h));
	char **hv = NULL;
	int nh = send_cfg_headers(c, &hv, err, errlen);
	if (!h || nh < 0 || !(h->curl = C.easy_init())) {
		if (h && nh >= 0)
			snprintf(err, errlen, "libcurl would not start");
		else if (!h)
			snprintf(err, errlen, "out of memory");
		free(h);
		for (int i = 0; i < nh; i++)
			free(hv[i]);
		free(hv);
		return NULL;
	}
	h->cfg = c;
	h->headers = C.slist_append(h->headers, "Content-Type: application/x-protobuf");
	/* The development version of the profiles signal this encodes
	 * (opentelemetry-proto's mechanism; the Collector checks it). */
	h->headers = C.slist_append(h->headers, "OTLP-Profiles-Development-Version: 1");
	if (c->gzip)
		h->headers = C.slist_append(h->headers, "Content-Encoding: gzip");
	/* No "Expect: 100-continue" round trip before the body. */
	h->headers = C.slist_append(h->headers, "Expect:");
	for (int i = 0; i < nh; i++) {
		h->headers = C.slist_append(h->headers, hv[i]);
		free(hv[i]);
	}
	free(hv);
	CURL *k = h->curl;
	C.easy_setopt(k, CURLOPT_URL, c->url);
	C.easy_setopt(k, CURLOPT_HTTPHEADER, h->headers);
	C.easy_setopt(k, CURLOPT_NOSIGNAL, 1L);
	C.easy_setopt(k, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	C.easy_setopt(k, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->timeout_ms < 5000 ? c->timeout_ms : 5000));
	C.easy_setopt(k, CURLOPT_WRITEFUNCTION, on_body);
	C.easy_setopt(k, CURLOPT_WRITEDATA, h);
	C.easy_setopt(k, CURLOPT_USERAGENT, "strata/" STRATA_VERSION);
	C.easy_setopt(k, CURLOPT_PROTOCOLS_STR, "http,https");
	if (c->ca[0])
		C.easy_setopt(k, CURLOPT_CAINFO, c->ca);
	return h;
}

void http_free(struct http *h)
{
	if (!h)
		return;
	C.slist_free_all(h->headers);
	C.easy_cleanup(h->curl);
	free(h);
}

/* gzip of body into *out (malloc'ed). */
static int gzip(const void *body, size_t len, uint8_t **out, size_t *olen)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	size_t cap = deflateBound(&z, len) + 32;
	uint8_t *b = malloc(cap);
	if (!b) {
		deflateEnd(&z);
		return -1;
	}
	z.next_in = (Bytef *)body;
	z.avail_in = (uInt)len;
	z.next_out = b;
	z.avail_out = (uInt)cap;
	int r = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (r != Z_STREAM_END) {
		free(b);
		return -1;
	}
	*out = b;
	*olen = cap - z.avail_out;
	return 0;
}

/* A partial success in the reply (ExportProfilesServiceResponse field 1:
 * rejected_profiles = 1, error_message = 2): the message, if any. */
static void partial(const uint8_t *d, size_t n, char *msg, size_t mn)
{
	size_t i = 0;
	uint64_t rejected = 0;
	const uint8_t *em = NULL;
	size_t eml = 0;
	while (i < n) {
		uint64_t key = 0, v = 0;
		for (int s = 0; i < n && s < 64; s += 7) {
			key |= (uint64_t)(d[i] & 0x7f) << s;
			if (!(d[i++] & 0x80))
				break;
		}
		if ((key & 7) != 2)
			return;
		for (int s = 0; i < n && s < 64; s += 7) {
			v |= (uint64_t)(d[i] & 0x7f) << s;
			if (!(d[i++] & 0x80))
				break;
		}
		if (v > n - i)
			return;
		if (key >> 3 == 1) {
			/* the partial success: its own fields */
			size_t j = i, end = i + v;
			while (j < end) {
				uint64_t k2 = d[j++], v2 = 0;
				for (int s = 0; j < end && s < 64; s += 7) {
					v2 |= (uint64_t)(d[j] & 0x7f) << s;
					if (!(d[j++] & 0x80))
						break;
				}
				if ((k2 >> 3) == 1 && (k2 & 7) == 0)
					rejected = v2;
				else if ((k2 >> 3) == 2 && (k2 & 7) == 2 && v2 <= end - j) {
					em = d + j;
					eml = v2;
					j += v2;
				} else
					break;
			}
		}
		i += v;
	}
	if (rejected || eml)
		snprintf(msg, mn, "the collector rejected %llu profile(s): %.*s", (unsigned long long)rejected,
			 (int)(eml > 300 ? 300 : eml), em ? (const char *)em : "");
}

int http_post(struct http *h, const void *body, size_t len, char *msg, size_t mn)
{
	uint8_t *z = NULL;
	size_t zl = 0;
	if (h->cfg->gzip && gzip(body, len, &z, &zl)) {
		snprintf(msg, mn, "out of memory");
		return HTTP_RETRY;
	}
	h->resp_len = 0;
	C.easy_setopt(h->curl, CURLOPT_POSTFIELDS, z ? (const void *)z : body);
	C.easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(z ? zl : len));
	CURLcode r = C.easy_perform(h->curl);
	free(z);
	msg[0] = 0;
	if (r != CURLE_OK) {
		snprintf(msg, mn, "%s", C.easy_strerror(r));
		return HTTP_RETRY;
	}
	long code = 0;
	C.easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &code);
	h->resp[h->resp_len] = 0;
	if (code >= 200 && code < 300) {
		partial((const uint8_t *)h->resp, h->resp_len, msg, mn);
		return HTTP_OK;
	}
	/* The body of an error is a google.rpc.Status (or text): its
	 * printable part says why. */
	char why[256];
	size_t w = 0;
	for (size_t i = 0; i < h->resp_len && w + 1 < sizeof(why); i++)
		if (h->resp[i] >= 32 && h->resp[i] < 127)
			why[w++] = h->resp[i];
	why[w] = 0;
	snprintf(msg, mn, "HTTP %ld%s%s", code, w ? ": " : "", why);
	/* Throttled, timed out or the server's trouble: try again later.
	 * Any other refusal is about the request: it would fail again. */
	if (code == 408 || code == 429 || code >= 500)
		return HTTP_RETRY;
	return HTTP_REJECTED;
}
