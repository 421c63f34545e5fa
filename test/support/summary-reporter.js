// Prints one plain closing line ("N passed, N failed") that CI systems read, after jest's own summary, and
// before it each failed test with the first lines of its failure: a CI log cut to a window may hold only the
// end, and a failing file's console output can push jest's own failure text out of it.
const FIRST_LINES = 12;

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const failures = [];
    for (const file of results.testResults) {
      if (file.testExecError) failures.push(`${file.testFilePath}: ${firstLines(file.testExecError.message)}`);
      for (const test of file.testResults) {
        if (test.status !== 'failed') continue;
        failures.push(`${file.testFilePath} › ${test.fullName}\n${firstLines(test.failureMessages.join('\n'))}`);
      }
    }
    if (failures.length > 0) process.stdout.write(`\nFailed:\n${failures.join('\n\n')}\n`);
    const skipped = results.numPendingTests + results.numTodoTests;
    const tail = skipped > 0 ? `, ${skipped} skipped` : '';
    process.stdout.write(`\n${results.numPassedTests} passed, ${results.numFailedTests} failed${tail}\n`);
  }
}

function firstLines(text) {
  return text.split('\n').slice(0, FIRST_LINES).join('\n');
}

module.exports = SummaryReporter;
