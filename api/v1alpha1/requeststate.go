package v1alpha1

// AnnotationRotateRequestStateKey asks the operator for a new request state key when
// it is set (or changed) on a gateway's request state Secret
// (<skillserver>-request-state): the new key seals from then on, and the previous one
// keeps opening the requestStates it sealed until they expire, then is dropped. Any new
// value asks again, e.g. the current time.
const AnnotationRotateRequestStateKey = "cantus.dev/rotate-request-state-key"
