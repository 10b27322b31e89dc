// aws-local-stepfunctions 3 calls Promise.withResolvers in every Task state; node 20 lacks it (added in 22).
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}
