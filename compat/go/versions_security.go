// The version sweeps of the security APIs (see versions.go): SaslHandshake and SaslAuthenticate
// on the session's PLAINTEXT listener, the ACL APIs without an authorizer, the SCRAM credential
// APIs. Both brokers of the sweep are the suite's plain ones; compat/test_security.py drives the
// same APIs through real clients against secured brokers.
package main

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	sweeps[17] = sweepSasl
	sweeps[36] = sweepSasl
	sweeps[29] = sweepAcls
	sweeps[30] = sweepAcls
	sweeps[31] = sweepAcls
	sweeps[50] = sweepScram
	sweeps[51] = sweepScram
}

// probeRequest is the request the "served" scenario sends for key: kmsg's zero request, except
// where Kafka cannot parse that (a DescribeAcls filter of UNKNOWN types closes the connection).
func probeRequest(key int16) kmsg.Request {
	if key == 29 {
		d := kmsg.NewPtrDescribeACLsRequest()
		d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return d
	}
	return kmsg.RequestForKey(key)
}

// SaslHandshake or SaslAuthenticate pinned to v on a PLAINTEXT listener, where Kafka's KafkaApis
// answers both ILLEGAL_SASL_STATE.
func sweepSasl(r *run) {
	var req kmsg.Request
	if r.key == 17 {
		h := kmsg.NewPtrSASLHandshakeRequest()
		h.Mechanism = "PLAIN"
		req = h
	} else {
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.SASLAuthBytes = []byte("\x00user\x00password")
		req = a
	}
	resp, err := r.pinned().SeedBrokers()[0].Request(r.ctx, req)
	r.must(err, "sasl request")
	switch resp := resp.(type) {
	case *kmsg.SASLHandshakeResponse:
		r.emit(obs{"step": "handshake", "err": errName(kerr.ErrorForCode(resp.ErrorCode)),
			"mechanisms": len(resp.SupportedMechanisms)})
	case *kmsg.SASLAuthenticateResponse:
		r.emit(obs{"step": "authenticate", "err": errName(kerr.ErrorForCode(resp.ErrorCode)),
			"message": resp.ErrorMessage, "token": len(resp.SASLAuthBytes), "lifetime": resp.SessionLifetimeMillis})
	}
}

// CreateAcls, DescribeAcls or DeleteAcls pinned to v (the other two with default versions):
// without an authorizer each is answered SECURITY_DISABLED with Kafka's message.
func sweepAcls(r *run) {
	create := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, r.name("t"), kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, c)
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	for _, req := range []kmsg.Request{create, describe, del} {
		cl := r.plain()
		if req.Key() == r.key {
			cl = r.pinned()
		}
		resp, err := cl.Request(r.ctx, req)
		r.must(err, "acl request")
		switch resp := resp.(type) {
		case *kmsg.CreateACLsResponse:
			for _, res := range resp.Results {
				r.emit(obs{"step": "create", "err": errName(kerr.ErrorForCode(res.ErrorCode)), "message": res.ErrorMessage})
			}
		case *kmsg.DescribeACLsResponse:
			r.emit(obs{"step": "describe", "err": errName(kerr.ErrorForCode(resp.ErrorCode)), "message": resp.ErrorMessage,
				"resources": len(resp.Resources)})
		case *kmsg.DeleteACLsResponse:
			for _, res := range resp.Results {
				r.emit(obs{"step": "delete", "err": errName(kerr.ErrorForCode(res.ErrorCode)), "message": res.ErrorMessage,
					"matching": len(res.MatchingACLs)})
			}
		}
	}
}

// AlterUserScramCredentials or DescribeUserScramCredentials pinned to v (the other with default
// versions), through kadm: an upsertion, too few iterations, deleting what does not exist, then a
// description of the user and of one without credentials.
func sweepScram(r *run) {
	alterer, describer := r.admin(), r.admin()
	if r.key == 51 {
		alterer = kadm.NewClient(r.pinned())
	} else {
		describer = kadm.NewClient(r.pinned())
	}
	user, few, missing := r.name("user"), r.name("few"), r.name("missing")
	altered, err := alterer.AlterUserSCRAMs(r.ctx,
		[]kadm.DeleteSCRAM{{User: missing, Mechanism: kadm.ScramSha512}},
		[]kadm.UpsertSCRAM{
			{User: user, Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "secret"},
			{User: few, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "secret"},
		})
	r.must(err, "alter user scram credentials")
	for _, u := range []string{user, few, missing} { // kadm itself refuses too few iterations
		res := altered[u]
		r.emit(obs{"step": "altered", "user": u[len(r.prefix)+1:], "err": errName(res.Err), "message": res.ErrMessage})
	}
	// Kafka's brokers describe from their metadata image, which follows the controller's
	// AlterUserScramCredentials a moment later: ask until both credentials are there (bounded)
	var described kadm.DescribedUserSCRAMs
	for try_ := 0; try_ < 50; try_++ {
		d, err := describer.DescribeUserSCRAMs(r.ctx, user, few, missing)
		r.must(err, "describe user scram credentials")
		described = d
		if d[user].Err == nil && d[few].Err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, u := range []string{user, few, missing} {
		res := described[u]
		var infos []string
		for _, i := range res.CredInfos {
			infos = append(infos, i.Mechanism.String()+"/"+strconv.Itoa(int(i.Iterations)))
		}
		r.emit(obs{"step": "described", "user": u[len(r.prefix)+1:], "err": errName(res.Err), "message": res.ErrMessage,
			"credentials": infos})
	}
}
