#!/bin/sh
# tls-certs.sh DIR: a throwaway CA and the certificates the TLS test and
# benchmark use, written into DIR with the openssl CLI (ECDSA P-256, valid
# two days): ca.pem/ca.key; server.pem/server.key for 127.0.0.1 and
# localhost; client.pem/client.key (clientAuth); other-ca.pem, a CA that
# signed nothing here (the "wrong CA" case). Never trust these anywhere.
set -eu
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=stepq-test-ca
key other-ca.key
openssl req -x509 -new -key other-ca.key -out other-ca.pem -days 2 -subj /CN=stepq-other-ca
key server.key
openssl req -new -key server.key -out server.csr -subj /CN=127.0.0.1
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -days 2 -out server.pem -extfile server.ext 2>/dev/null
key client.key
openssl req -new -key client.key -out client.csr -subj /CN=stepq-test-client
printf 'extendedKeyUsage=clientAuth\n' >client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -days 2 -out client.pem -extfile client.ext 2>/dev/null
